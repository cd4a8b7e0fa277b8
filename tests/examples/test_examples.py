"""The scripts in examples/ train for real, at a tiny size: each `make_job` gives a Job that fits
to success with a finite loss and metric, and loads as `--job examples/x.py:make_job` would."""

from __future__ import annotations

import math

import pytest

import trainpilot
from trainpilot.job.job_file import load_job

from .conftest import EXAMPLES, load_example
JOB_EXAMPLES = ("cnn_images", "transformer_tokens", "regression_mlp", "costly_transforms")


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
