"""The ane backend end to end, on Linux.

Real: splitting, conversion to .mlpackage, the updatable .mlmodel, feature batching, loading
weights back, export. Stood in for (tests only, `TorchRuntime`): the three Core ML runtime calls,
which exist only on macOS and are exercised by test_ane_runtime.py there.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

from trainpilot.backends import get_backend
from trainpilot.backends.ane import CORE_ML_UPDATE, FROZEN_BACKBONE, AneBackend, PlatformFacts
from trainpilot.backends.ane.placement import OpPlacement
from trainpilot.backends.ane.runtime import UpdateResult
from trainpilot.backends.ane.updatable import spec_weights
from trainpilot.errors import BackendUnavailable, WorkloadError
from trainpilot.plans import Availability, Plan
from trainpilot.job.models import build_model
from trainpilot.job.workload import profile_model

ct = pytest.importorskip("coremltools")

SHAPE = (1, 12, 12)
MAC = PlatformFacts("Darwin", "arm64", (14, 5))


class TorchRuntime:
    """Stands in for Core ML (tests only). predict runs the registered PyTorch backbone, rounded
    through float16 as the ANE computes; compute_plan reads the real package's operations;
    run_update nudges the built model's real weights, as a trained model's would differ."""

    def __init__(self, update: bool = True):
        self.modules: dict[Path, nn.Module] = {}
        self.update = update
        self.batches: list[tuple[int, ...]] = []
        self.update_call: dict[str, object] = {}

    def availability(self) -> Availability:
        return Availability(True)

    def update_availability(self) -> Availability:
        return Availability(True) if self.update else Availability(False, "pyobjc-framework-CoreML is not installed")

    def placement_availability(self) -> Availability:
        return Availability(True)

    def predictor(self, package: Path, input_name: str, output_name: str):  # type: ignore[no-untyped-def]
        module = self.modules[package].eval()

        def predict(batch: np.ndarray) -> np.ndarray:
            self.batches.append(batch.shape)
            with torch.no_grad():
                return module(torch.from_numpy(batch)).numpy().astype(np.float16).astype(np.float32)

        return predict

    def compute_plan(self, package: Path) -> list[OpPlacement]:
        spec = ct.utils.load_spec(str(package))
        ops = [op.type for block in spec.mlProgram.functions["main"].block_specializations.values() for op in block.operations]
        return [OpPlacement(op, "cpu" if op == "cast" else "ane", 0.01 if op == "cast" else 0.2) for op in ops]

    def run_update(self, model_path, layer_names, input_name, label_name, inputs, labels, *, on_epoch=None, out_dir=None, timeout_s=None):  # type: ignore[no-untyped-def]
        self.update_call = {"layers": list(layer_names), "x": inputs.shape, "x_dtype": inputs.dtype, "y": labels.dtype}
        spec = ct.utils.load_spec(str(model_path))
        epochs = spec.neuralNetworkClassifier.updateParams.epochs.defaultValue
        for epoch in range(epochs):
            if on_epoch:
                on_epoch(epoch, 1.0 / (epoch + 1))
        weights = {name: {k: v + 0.5 for k, v in entry.items()} for name, entry in spec_weights(model_path).items()}
        return UpdateResult(weights=weights, epoch_losses=[1.0 / (e + 1) for e in range(epochs)], seconds=0.01)


def _profile(name: str) -> object:
    return profile_model(build_model(name, SHAPE, 4), SHAPE, 4, 64, name=name)


# ---------------------------------------------------------------- availability and plans


def test_on_this_linux_machine_it_is_unavailable_with_the_reason() -> None:
    backend = get_backend("ane")
    assert isinstance(backend, AneBackend)
    assert backend.availability() == Availability(False, "not Apple Silicon")
    assert backend.plans(2) == []
    assert backend.describe()["modes"][CORE_ML_UPDATE]["reason"] == "not Apple Silicon"
    assert "no public API trains on the ANE" in backend.runs_on


@pytest.mark.parametrize(
    ("facts", "reason"),
    [
        (PlatformFacts("Linux", "x86_64", ()), "not Apple Silicon"),
        (PlatformFacts("Linux", "aarch64", ()), "not Apple Silicon"),
        (PlatformFacts("Darwin", "x86_64", (13, 6)), "Intel Mac"),
        (PlatformFacts("Darwin", "arm64", (12, 7)), "macOS 12.7 is too old"),
    ],
)
def test_platform_reasons(facts: PlatformFacts, reason: str) -> None:
    avail = AneBackend(platform_facts=facts, runtime=TorchRuntime()).availability()
    assert not avail and reason in avail.reason


def test_on_a_mac_both_modes_are_planned_and_update_needs_pyobjc() -> None:
    assert [p.mode for p in AneBackend(platform_facts=MAC, runtime=TorchRuntime()).plans(8)] == [FROZEN_BACKBONE, CORE_ML_UPDATE]
    backend = AneBackend(platform_facts=MAC, runtime=TorchRuntime(update=False))
    assert [p.mode for p in backend.plans(8)] == [FROZEN_BACKBONE]
    assert "pyobjc" in backend.mode_availability(CORE_ML_UPDATE).reason


def test_the_real_runtime_refuses_off_macos(tmp_path: Path) -> None:
    from trainpilot.backends.ane.runtime import CoreMLRuntime

    runtime = CoreMLRuntime()
    assert not runtime.availability() and "macOS" in runtime.availability().reason
    with pytest.raises(BackendUnavailable, match="macOS"):
        runtime.predictor(tmp_path / "x.mlpackage", "x", "y")


# ---------------------------------------------------------------- what it can run


def test_mode_support_from_profiles() -> None:
    cnn = _profile("small_cnn")
    support = AneBackend().mode_support(cnn)  # type: ignore[arg-type]
    assert support[CORE_ML_UPDATE] and not support[FROZEN_BACKBONE]
    assert "--freeze N" in support[FROZEN_BACKBONE].reason
    assert all(AneBackend(freeze=1).mode_support(cnn).values())  # type: ignore[arg-type]
    assert not AneBackend(freeze=3).mode_support(cnn)[FROZEN_BACKBONE]  # type: ignore[arg-type]


def test_an_lstm_fits_neither_mode_and_says_why() -> None:
    avail = AneBackend(freeze=1).supports(_profile("rnn"))  # type: ignore[arg-type]
    assert not avail
    assert "frozen-backbone: recurrent layers" in avail.reason
    assert "core-ml-update trains only conv/dense layers; this model has recurrent layers" in avail.reason


def test_check_model_gives_the_exact_answer() -> None:
    result = AneBackend(freeze=1).check_model(build_model("rnn", SHAPE, 3), SHAPE)
    assert not result[FROZEN_BACKBONE] and not result[CORE_ML_UPDATE]
    assert all(AneBackend(freeze=2).check_model(build_model("small_cnn", SHAPE, 3), SHAPE).values())


def test_freeze_is_validated_and_with_options_copies() -> None:
    with pytest.raises(WorkloadError):
        AneBackend(freeze=-1)
    base = AneBackend()
    configured = base.with_options(freeze=2)
    assert configured.freeze == 2 and base.freeze is None


# ---------------------------------------------------------------- frozen-backbone


@pytest.fixture(scope="module")
def frozen_job(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    torch.manual_seed(0)
    model = build_model("small_cnn", SHAPE, 4)
    runtime = TorchRuntime()
    backend = AneBackend(freeze=2, runtime=runtime, work_dir=tmp_path_factory.mktemp("job"), batch_size=16,
                         platform_facts=MAC)
    prepared = backend.prepare_frozen_backbone(model, SHAPE)
    runtime.modules[prepared.converted.path] = prepared.split.backbone
    x = np.random.default_rng(0).normal(size=(40, *SHAPE)).astype(np.float32)
    head, features = backend.adapt_job(model, x, Plan("ane", mode=FROZEN_BACKBONE))
    return model, backend, runtime, prepared, x, head, features


def test_adapt_job_returns_the_head_and_batched_features(frozen_job) -> None:  # type: ignore[no-untyped-def]
    model, _, runtime, prepared, x, head, features = frozen_job
    assert prepared.converted.path.is_dir() and prepared.converted.path.suffix == ".mlpackage"
    assert features.shape == (40, 288) and features.dtype == np.float32
    assert runtime.batches == [(16, *SHAPE)] * 3, "fixed-size batches, the last one padded"
    model.eval()
    with torch.no_grad():
        logits = head(torch.from_numpy(features))
        np.testing.assert_allclose(logits.numpy(), model(torch.from_numpy(x)).numpy(), atol=2e-2)
    assert head is prepared.split.head


def test_training_the_head_on_features_trains_the_model(frozen_job) -> None:  # type: ignore[no-untyped-def]
    model, *_, head, features = frozen_job
    before = {k: v.clone() for k, v in model.state_dict().items()}
    opt = torch.optim.SGD(head.parameters(), lr=0.1)
    y = torch.randint(0, 4, (len(features),), generator=torch.Generator().manual_seed(1))
    for _ in range(3):
        opt.zero_grad()
        nn.functional.cross_entropy(head(torch.from_numpy(features)), y).backward()
        opt.step()
    after = model.state_dict()
    changed = {k for k in before if not torch.equal(before[k], after[k])}
    assert changed == {"classifier.weight", "classifier.bias"}, "only the head's parameters move"


def test_validation_features_reuse_the_conversion(frozen_job) -> None:  # type: ignore[no-untyped-def]
    model, backend, runtime, prepared, *_ = frozen_job
    val = np.zeros((5, *SHAPE), dtype=np.float32)
    head, features = backend.adapt_job(model, val, Plan("ane", mode=FROZEN_BACKBONE))
    assert head is prepared.split.head and features.shape == (5, 288)
    assert backend.prepare_frozen_backbone(model, SHAPE) is prepared
    assert len(prepared.feature_seconds) == 2


def test_core_ml_update_is_not_an_adapted_pytorch_job(frozen_job) -> None:  # type: ignore[no-untyped-def]
    model, backend, *_ = frozen_job
    with pytest.raises(BackendUnavailable, match="train_core_ml_update"):
        backend.adapt_job(model, np.zeros((2, *SHAPE), np.float32), Plan("ane", mode=CORE_ML_UPDATE))


def test_export_writes_a_package_and_reports_placement(frozen_job, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    model, backend, *_ = frozen_job
    report = backend.export(model, SHAPE, tmp_path / "trained.mlpackage")
    assert report.converted.path.is_dir()
    assert report.placement is not None and report.placement.ran_on_ane
    assert report.placement_note.startswith(f"{report.placement.total_ops} ops planned by Core ML: ANE")


def test_export_on_linux_says_placement_is_unavailable(tmp_path: Path) -> None:
    report = AneBackend(work_dir=tmp_path).export(build_model("mlp", SHAPE, 3), SHAPE, tmp_path / "m.mlpackage")
    assert report.converted.path.is_dir() and report.placement is None
    assert report.placement_note == "placement n/a: the Core ML runtime needs macOS"


def test_default_work_dir_lives_under_trainpilot_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRAINPILOT_HOME", str(tmp_path))
    assert AneBackend().work_dir().parent == tmp_path / "ane"


# ---------------------------------------------------------------- core-ml-update


def test_core_ml_update_trains_in_core_ml_and_loads_the_result_back(tmp_path: Path) -> None:
    torch.manual_seed(0)
    model = build_model("mlp", SHAPE, 3)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    runtime = TorchRuntime()
    epochs: list[tuple[int, float]] = []
    report = AneBackend(runtime=runtime, work_dir=tmp_path, platform_facts=MAC).train_core_ml_update(
        model, np.zeros((10, *SHAPE), np.float32), np.arange(10) % 3, 3, epochs=2, batch_size=5, learning_rate=0.01,
        on_epoch=lambda e, loss: epochs.append((e, loss)),
    )
    assert report.model.path.suffix == ".mlmodel" and report.model.path.is_file()
    assert report.device_note == "device chosen by Core ML"
    assert runtime.update_call == {"layers": ["l1_linear", "l3_linear"], "x": (10, 144), "x_dtype": np.float32, "y": np.int64}
    assert epochs == [(0, 1.0), (1, 0.5)] and report.epoch_losses == [1.0, 0.5]
    assert report.tensors_loaded == 4
    for key, value in model.state_dict().items():
        torch.testing.assert_close(value, before[key] + 0.5)
