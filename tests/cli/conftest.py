"""Fixtures the CLI tests share: a small demo dataset on disk, and a calibrated data directory."""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from typer.testing import CliRunner

from trainpilot.backends import probe
from trainpilot.predict.calibration import save_calibration
from trainpilot.predict.derive import calibration_for_target
from trainpilot.machine.target_profiles import TargetBackend, TargetMachine
from trainpilot_tui.cli import app


@pytest.fixture(scope="module")
def dataset_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo set (300 samples) written by the CLI itself, once per test module."""
    directory = tmp_path_factory.mktemp("data")
    result = CliRunner().invoke(app, ["headless", "make-dataset", str(directory), "--samples", "300"])
    assert result.exit_code == 0, result.output
    return directory


@pytest.fixture
def calibrated_home(trainpilot_home: Path) -> Path:
    """A calibration for this machine, derived from a written description, so `plan` need not
    measure (the measured calibration has its own tests)."""
    hw = probe(include_backends=False)
    box = TargetMachine("test box", "tests", ("tests",), "Linux", "x86_64", hw.logical_cpus, hw.logical_cpus, 8 * 2**30, 40e9,
                        {"cpu": TargetBackend(80e9, 20e9, "fp32")})
    save_calibration(replace(calibration_for_target(box), machine_id=hw.machine_id, described=None), trainpilot_home / "calibration")
    return trainpilot_home
