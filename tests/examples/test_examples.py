"""The scripts in examples/ train for real, at a tiny size: each `make_job` gives a Job that fits
to success with a finite loss and metric, and loads as `--job examples/x.py:make_job` would."""

from __future__ import annotations

import importlib.util
import math
import sys
from dataclasses import replace
from pathlib import Path
from types import ModuleType

import pytest

import trainpilot
from trainpilot.backends import probe
from trainpilot.job.job_file import load_job
from trainpilot.machine.target_profiles import TargetBackend, TargetMachine
from trainpilot.predict.calibration import save_calibration
from trainpilot.predict.derive import calibration_for_target

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
JOB_EXAMPLES = ("cnn_images", "transformer_tokens", "regression_mlp", "costly_transforms")


@pytest.fixture(autouse=True)
def calibrated_home(trainpilot_home: Path) -> Path:
    """A calibration derived from a written description of this machine (as tests/cli does), so
    planning need not measure for ~10 s first."""
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


def finite(value: object) -> bool:
    return isinstance(value, float) and math.isfinite(value)


@pytest.mark.parametrize(
    ("name", "samples"),
    [("cnn_images", 200), ("transformer_tokens", 200), ("regression_mlp", 500), ("costly_transforms", 200)],
)
def test_example_job_trains(name: str, samples: int) -> None:
    job = load_example(name).make_job(samples=samples)
    result = trainpilot.fit(job, epochs=1)
    out = result.to_dict()
    assert result.status == "success", result.message
    assert finite(out["loss"]) and finite(out["val_loss"])
    assert finite(out["val_accuracy"])  # the job's metric, whatever it measures, is reported here
    assert result.model is not None


def test_costly_transforms_plans_loader_workers() -> None:
    job = load_example("costly_transforms").make_job(samples=200)
    report = trainpilot.plan(job, epochs=1)
    assert any("loading a batch costs" in line for line in report.trace)
    assert any(p.get("loader_workers") for p in report.plans if p.get("predicted_s") is not None)


def test_regression_metric_is_r2() -> None:
    import torch

    r2 = load_example("regression_mlp").r2
    target = torch.tensor([[1.0], [2.0], [3.0]])
    assert r2(target, target) == pytest.approx(1.0)
    assert r2(torch.full_like(target, 2.0), target) == pytest.approx(0.0)


@pytest.mark.parametrize("name", JOB_EXAMPLES)
def test_example_loads_as_job_file(name: str) -> None:
    """`trainpilot headless run --job examples/<name>.py:make_job` calls make_job() with no arguments."""
    assert isinstance(load_job(f"{EXAMPLES / name}.py:make_job"), trainpilot.Job)


def test_lightning_example_trains() -> None:
    pytest.importorskip("lightning")
    pytest.importorskip("trainpilot.lightning", reason="trainpilot.lightning is not written yet")
    metrics = load_example("lightning_module").train(samples=400, epochs=1)
    assert finite(metrics["val_loss"]) and finite(metrics["val_acc"])
