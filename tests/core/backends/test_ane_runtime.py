"""The macOS-only adapter's own tests: real Core ML predict, MLUpdateTask and MLComputePlan.

Skipped wherever the Core ML runtime is missing (Linux CI); run them on an Apple Silicon Mac with
`pip install 'train-pilot[coreml]' pyobjc-framework-CoreML`.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from trainpilot.backends.ane.runtime import CoreMLRuntime

RUNTIME = CoreMLRuntime()
pytestmark = [
    pytest.mark.macos,
    pytest.mark.skipif(not RUNTIME.availability(), reason=f"Core ML runtime: {RUNTIME.availability().reason}"),
]

SHAPE = (1, 12, 12)


def test_predict_matches_pytorch_within_fp16(tmp_path: Path) -> None:
    from trainpilot.backends.ane.convert import convert_module
    from trainpilot.backends.ane.backbone import split_model
    from trainpilot.job.models import build_model

    model = build_model("small_cnn", SHAPE, 4)
    split = split_model(model, SHAPE, 2)
    converted = convert_module(split.backbone, SHAPE, tmp_path / "b.mlpackage", batch_size=8, output_name="features")
    predict = RUNTIME.predictor(converted.path, converted.input_name, converted.output_name)
    x = np.random.default_rng(0).normal(size=(8, *SHAPE)).astype(np.float32)
    with torch.no_grad():
        expected = split.backbone.eval()(torch.from_numpy(x)).numpy()
    np.testing.assert_allclose(predict(x), expected, atol=5e-2, rtol=5e-2)


@pytest.mark.skipif(not RUNTIME.placement_availability(), reason=RUNTIME.placement_availability().reason)
def test_compute_plan_places_every_operation(tmp_path: Path) -> None:
    from trainpilot.backends.ane.convert import export_mlpackage
    from trainpilot.backends.ane.placement import summarize
    from trainpilot.job.models import build_model

    converted = export_mlpackage(build_model("small_cnn", SHAPE, 4), SHAPE, tmp_path / "m.mlpackage")
    report = summarize(RUNTIME.compute_plan(converted.path))
    assert report.total_ops >= sum(converted.op_counts.values()) - converted.op_counts.get("cast", 0)
    assert set(report.counts) <= {"ane", "gpu", "cpu", "unknown"}


@pytest.mark.skipif(not RUNTIME.update_availability(), reason=RUNTIME.update_availability().reason)
def test_update_task_trains_and_returns_every_layer(tmp_path: Path) -> None:
    from trainpilot.backends.ane.updatable import build_updatable_model, spec_weights
    from trainpilot.job.models import build_model

    model = build_model("mlp", SHAPE, 3)
    built = build_updatable_model(model, SHAPE, 3, tmp_path / "u.mlmodel", epochs=2, batch_size=8, learning_rate=0.1)
    rng = np.random.default_rng(0)
    x = rng.normal(size=(32, *built.input_shape)).astype(np.float32)
    y = rng.integers(0, 3, size=32)
    epochs: list[int] = []
    result = RUNTIME.run_update(built.path, list(built.layers), built.input_name, built.label_name, x, y,
                                on_epoch=lambda e, _loss: epochs.append(e), out_dir=tmp_path, timeout_s=120)
    assert epochs == [0, 1] and len(result.epoch_losses) == 2
    before = spec_weights(built.path)
    assert set(result.weights) == set(built.layers)
    assert any(not np.allclose(result.weights[n]["weights"], before[n]["weights"]) for n in built.layers)
