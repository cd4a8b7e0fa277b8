"""Shared pieces of the example tests: a calibrated home, and an example loaded as a module."""
from __future__ import annotations

import importlib.util
import sys
from dataclasses import replace
from pathlib import Path
from types import ModuleType

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.fixture(autouse=True)
def calibrated_home(trainpilot_home: Path) -> Path:
    """A calibration derived from a written description of this machine (as tests/cli does), so
    planning need not measure for ~10 s first."""
    from trainpilot.backends import probe
    from trainpilot.machine.target_profiles import TargetBackend, TargetMachine
    from trainpilot.predict.calibration import save_calibration
    from trainpilot.predict.derive import calibration_for_target

    hw = probe(include_backends=False)
    box = TargetMachine(
        "test box", "tests", ("tests",), "Linux", "x86_64", hw.logical_cpus, hw.logical_cpus, 8 * 2**30, 40e9,
        {"cpu": TargetBackend(80e9, 20e9, "fp32")},
    )  # fmt: skip
    calibration = replace(calibration_for_target(box), machine_id=hw.machine_id, described=None)
    save_calibration(calibration, trainpilot_home / "calibration")
    return trainpilot_home


def load_example(name: str) -> ModuleType:
    """examples/<name>.py as a module, registered so its classes pickle (DataLoader workers)."""
    module_name = f"trainpilot_example_{name}"
    if module_name not in sys.modules:
        spec = importlib.util.spec_from_file_location(module_name, EXAMPLES / f"{name}.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[module_name] = module
        spec.loader.exec_module(module)
    return sys.modules[module_name]
