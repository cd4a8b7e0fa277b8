"""The `ane` backend: Apple Neural Engine through Core ML, in the two modes Apple's APIs allow.

No public Apple API trains a network on the ANE. What exists, and what this backend uses:

- frozen-backbone: the frozen first layers are converted to a Core ML ML program and run forward
  with compute units CPU_AND_NE (Core ML places each op on the ANE or the CPU); their outputs are
  cached once, and the trainable head trains in PyTorch on the CPU. Typical fine-tuning.
- core-ml-update: a model made only of conv/dense layers becomes an updatable Core ML neural
  network trained by MLUpdateTask; the device is chosen by Core ML and Apple does not say which.

After training, `export` writes an .mlpackage and, on macOS 14.4+, reads MLComputePlan's
per-operation placement, so "runs on the ANE" is a reported figure rather than a claim.
"""

from __future__ import annotations

import platform
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from trainpilot.backends.ane.coreml_import import coremltools_dir
from trainpilot.backends.base import Backend
from trainpilot.errors import BackendUnavailable, WorkloadError
from trainpilot.plans import Availability, Plan

if TYPE_CHECKING:
    import torch
    from torch import nn

    from trainpilot.backends.ane.backbone import Split
    from trainpilot.backends.ane.convert import ConvertedModel
    from trainpilot.backends.ane.placement import PlacementReport
    from trainpilot.backends.ane.runtime import CoreMLRuntime
    from trainpilot.backends.ane.updatable import UpdatableModel
    from trainpilot.job.workload import WorkloadProfile

FROZEN_BACKBONE = "frozen-backbone"
CORE_ML_UPDATE = "core-ml-update"
MODES = (FROZEN_BACKBONE, CORE_ML_UPDATE)

MODE_TEXT = {
    FROZEN_BACKBONE: (
        "frozen layers run forward in Core ML (ANE or CPU, Core ML's choice); the head trains in PyTorch on the CPU"
    ),
    CORE_ML_UPDATE: "Core ML trains the conv/dense layers on-device (MLUpdateTask); device chosen by Core ML",
}
# Layer kinds (workload.WorkloadProfile.layer_kinds) an updatable Core ML neural network can train.
UPDATABLE_KINDS = frozenset({"conv", "dense"})


@dataclass(frozen=True)
class PlatformFacts:
    system: str
    machine: str
    mac_version: tuple[int, ...]

    @classmethod
    def here(cls) -> PlatformFacts:
        from trainpilot.backends.ane.runtime import mac_version

        return cls(platform.system(), platform.machine(), mac_version())


@dataclass
class FrozenBackbone:
    """A split model whose backbone has been converted; reused for train and validation features."""

    split: Split
    converted: ConvertedModel
    feature_shape: tuple[int, ...]
    feature_seconds: list[float] = field(default_factory=list)  # one entry per adapt_job call


@dataclass(frozen=True)
class UpdateReport:
    model: UpdatableModel
    epoch_losses: list[float]
    seconds: float
    tensors_loaded: int  # weight/bias tensors copied back into the PyTorch model
    device_note: str = "device chosen by Core ML"


@dataclass(frozen=True)
class ExportReport:
    converted: ConvertedModel
    placement: PlacementReport | None
    placement_note: str  # the placement summary, or why it could not be read here


class AneBackend(Backend):
    name = "ane"
    title = "Apple Neural Engine (Core ML)"
    runs_on = (
        "Core ML runs inference on the ANE and decides placement itself; no public API trains on the ANE. "
        "frozen-backbone: frozen layers run forward in Core ML, the head trains in PyTorch on the CPU. "
        "core-ml-update: Core ML trains conv/dense layers, device chosen by Core ML."
    )

    def __init__(
        self,
        freeze: int | None = None,
        *,
        runtime: CoreMLRuntime | Any | None = None,
        work_dir: Path | str | None = None,
        batch_size: int = 64,
        platform_facts: PlatformFacts | None = None,
    ):
        if freeze is not None and (isinstance(freeze, bool) or not isinstance(freeze, int) or freeze < 0):
            raise WorkloadError(f"--freeze must be a whole number of layers, got {freeze!r}")
        self.freeze = freeze
        self.batch_size = int(batch_size)
        self._runtime = runtime
        self._work_dir = Path(work_dir) if work_dir is not None else None
        self._facts = platform_facts
        self._prepared: dict[tuple[int, int | None, tuple[int, ...]], FrozenBackbone] = {}

    def with_options(self, *, freeze: int | None = None, work_dir: Path | str | None = None) -> AneBackend:
        """A configured copy (the registry's instance is shared, so it is never mutated)."""
        return AneBackend(
            freeze,
            runtime=self._runtime,
            work_dir=work_dir or self._work_dir,
            batch_size=self.batch_size,
            platform_facts=self._facts,
        )

    # ------------------------------------------------------------------ what exists here

    @property
    def runtime(self) -> CoreMLRuntime | Any:
        if self._runtime is None:
            from trainpilot.backends.ane.runtime import CoreMLRuntime

            self._runtime = CoreMLRuntime()
        return self._runtime

    @property
    def facts(self) -> PlatformFacts:
        if self._facts is None:
            self._facts = PlatformFacts.here()
        return self._facts

    def availability(self) -> Availability:
        facts = self.facts
        if facts.system != "Darwin":
            return Availability(False, "not Apple Silicon")
        if facts.machine != "arm64":
            return Availability(False, "not Apple Silicon (an Intel Mac has no Neural Engine)")
        if facts.mac_version and facts.mac_version < (13,):
            version = ".".join(map(str, facts.mac_version))
            return Availability(False, f"macOS {version} is too old (Core ML ML programs need macOS 13 or later)")
        if coremltools_dir() is None:
            return Availability(False, "coremltools is not installed (pip install 'train-pilot[coreml]')")
        return self.runtime.availability()

    def mode_availability(self, mode: str) -> Availability:
        """Whether this machine can run `mode` at all (the workload is checked by `supports`)."""
        if mode not in MODES:
            return Availability(False, f"unknown ANE mode '{mode}' (choose {' or '.join(MODES)})")
        base = self.availability()
        if not base:
            return base
        return self.runtime.update_availability() if mode == CORE_ML_UPDATE else Availability(True)

    def plans(self, logical_cpus: int) -> list[Plan]:
        return [Plan("ane", mode=mode) for mode in MODES if self.mode_availability(mode)]

    # ------------------------------------------------------------------ what it can run

    def mode_support(self, profile: WorkloadProfile) -> dict[str, Availability]:
        """Per mode, whether this workload fits, judged from its profile alone (no model needed).
        `check_model` gives the exact answer once the module exists."""
        if (profile.extra or {}).get("job_form", "zoo") != "zoo":
            why = Availability(
                False, "the Core ML paths train the zoo's classifiers on in-memory arrays, not a job's own"
            )
            return {mode: why for mode in MODES}
        kinds = {k for k, v in profile.layer_kinds.items() if v}
        frozen: Availability
        if profile.has_rnn:
            frozen = Availability(False, "recurrent layers cannot be split off into a Core ML backbone here")
        elif self.freeze is None and not profile.extra.get("ane_backbone"):
            frozen = Availability(False, "frozen-backbone needs --freeze N (or a model with `backbone` and `head`)")
        elif self.freeze is not None and not 1 <= self.freeze < profile.layers:
            frozen = Availability(
                False, f"--freeze {self.freeze} must leave 1..{profile.layers - 1} of {profile.layers} layers frozen"
            )
        else:
            frozen = Availability(True)
        other = sorted(kinds - UPDATABLE_KINDS)
        if other:
            update = Availability(
                False, "core-ml-update trains only conv/dense layers; this model has " + ", ".join(other) + " layers"
            )
        elif self.freeze is not None and self.freeze >= profile.layers:
            update = Availability(False, f"--freeze {self.freeze} leaves no layer for Core ML to update")
        else:
            update = Availability(True)
        return {FROZEN_BACKBONE: frozen, CORE_ML_UPDATE: update}

    def supports(self, profile: WorkloadProfile) -> Availability:
        support = self.mode_support(profile)
        if any(support.values()):
            return Availability(True)
        return Availability(False, "; ".join(f"{mode}: {a.reason}" for mode, a in support.items()))

    def supports_plan(self, profile: WorkloadProfile, plan: Plan) -> Availability:
        return self.mode_support(profile).get(
            plan.mode or FROZEN_BACKBONE, Availability(False, f"unknown ANE mode '{plan.mode}'")
        )

    def check_model(self, model: nn.Module, sample_shape: tuple[int, ...]) -> dict[str, Availability]:
        """The exact per-mode answer for a built model (runs a probe forward pass, no conversion)."""
        from trainpilot.backends.ane.backbone import split_model
        from trainpilot.backends.ane.updatable import check_updatable

        try:
            split_model(model, sample_shape, self.freeze)
            frozen = Availability(True)
        except WorkloadError as exc:
            frozen = Availability(False, exc.problem)
        return {FROZEN_BACKBONE: frozen, CORE_ML_UPDATE: check_updatable(model)}

    def device(self, plan: Plan) -> torch.device:
        import torch

        return torch.device("cpu")  # the head (frozen-backbone) trains on the CPU in PyTorch

    def describe(self) -> dict[str, Any]:
        data = super().describe()
        data["modes"] = {
            mode: {
                "available": (a := self.mode_availability(mode)).available,
                "reason": a.reason,
                "runs_on": MODE_TEXT[mode],
            }
            for mode in MODES
        }
        return data

    # ------------------------------------------------------------------ frozen-backbone

    def work_dir(self) -> Path:
        if self._work_dir is None:
            from trainpilot.paths import data_home

            root = data_home() / "ane"
            root.mkdir(parents=True, exist_ok=True)
            self._work_dir = Path(tempfile.mkdtemp(prefix="job-", dir=root))
        self._work_dir.mkdir(parents=True, exist_ok=True)
        return self._work_dir

    def prepare_frozen_backbone(self, model: nn.Module, sample_shape: tuple[int, ...]) -> FrozenBackbone:
        """Split the model and convert its backbone to an .mlpackage (any OS). Cached per model."""
        from trainpilot.backends.ane.backbone import output_shape, split_model
        from trainpilot.backends.ane.convert import convert_module

        sample_shape = tuple(int(d) for d in sample_shape)
        key = (id(model), self.freeze, sample_shape)
        cached = self._prepared.get(key)
        if cached is not None:
            return cached
        split = split_model(model, sample_shape, self.freeze)
        feature_shape = output_shape(split.backbone, sample_shape)
        converted = convert_module(
            split.backbone,
            sample_shape,
            self.work_dir() / "backbone.mlpackage",
            batch_size=self.batch_size,
            output_name="features",
        )
        prepared = FrozenBackbone(split, converted, feature_shape)
        self._prepared[key] = prepared
        return prepared

    def adapt_job(self, model: nn.Module, inputs: Any, plan: Plan) -> tuple[nn.Module, Any]:
        """frozen-backbone: returns (head, features): the head module (shares parameters with
        `model`) and a float32 array (N, *feature_shape), row i computed from inputs[i] by the
        backbone in Core ML. Call it again with validation inputs: the conversion is reused.

        core-ml-update does not train in PyTorch; use `train_core_ml_update` for that plan.
        """
        if plan.mode == CORE_ML_UPDATE:
            raise BackendUnavailable("core-ml-update trains inside Core ML: call AneBackend.train_core_ml_update")
        if plan.mode not in (None, FROZEN_BACKBONE):
            raise BackendUnavailable(f"unknown ANE mode '{plan.mode}'")
        from trainpilot.backends.ane.features import cache_features, check_feature_memory

        sample_shape = sample_shape_of(inputs)
        prepared = self.prepare_frozen_backbone(model, sample_shape)
        check_feature_memory(len(inputs), prepared.feature_shape)
        predict = self.runtime.predictor(
            prepared.converted.path, prepared.converted.input_name, prepared.converted.output_name
        )
        start = time.perf_counter()
        features = cache_features(
            predict,
            inputs,
            batch_size=prepared.converted.batch_size,
            sample_shape=sample_shape,
            output_shape=prepared.feature_shape,
        )
        prepared.feature_seconds.append(time.perf_counter() - start)
        return prepared.split.head, features

    # ------------------------------------------------------------------ core-ml-update

    def trains_whole_epochs(self, plan: Plan) -> bool:
        return plan.mode == CORE_ML_UPDATE

    def train_epoch(self, model: nn.Module, train_set: Any, *, batch_size: int, lr: float) -> float:
        """One epoch through Core ML's MLUpdateTask (macOS), with Adam as the session's own steps use."""
        report = self.train_core_ml_update(
            model,
            train_set.X,
            train_set.y,
            train_set.num_classes,
            epochs=1,
            batch_size=batch_size,
            learning_rate=lr,
            optimizer="adam",
        )
        return float(report.epoch_losses[-1])

    def build_update_model(
        self,
        model: nn.Module,
        sample_shape: tuple[int, ...],
        num_classes: int,
        *,
        epochs: int,
        batch_size: int,
        learning_rate: float,
        optimizer: str = "sgd",
    ) -> UpdatableModel:
        from trainpilot.backends.ane.updatable import build_updatable_model

        return build_updatable_model(
            model,
            sample_shape,
            num_classes,
            self.work_dir() / "updatable.mlmodel",
            epochs=epochs,
            batch_size=batch_size,
            learning_rate=learning_rate,
            optimizer=optimizer,
            freeze=self.freeze or 0,
        )

    def train_core_ml_update(
        self,
        model: nn.Module,
        inputs: Any,
        labels: Any,
        num_classes: int,
        *,
        epochs: int,
        batch_size: int,
        learning_rate: float,
        optimizer: str = "sgd",
        on_epoch: Callable[[int, float], None] | None = None,
    ) -> UpdateReport:
        """Train `model` with Core ML's on-device update and copy the result back into it (macOS)."""
        from trainpilot.backends.ane.updatable import load_weights

        sample_shape = sample_shape_of(inputs)
        built = self.build_update_model(
            model,
            sample_shape,
            num_classes,
            epochs=epochs,
            batch_size=batch_size,
            learning_rate=learning_rate,
            optimizer=optimizer,
        )
        x = np.asarray(inputs, dtype=np.float32).reshape(len(inputs), *built.input_shape)
        y = np.asarray(labels).astype(np.int64).reshape(-1)
        result = self.runtime.run_update(
            built.path,
            list(built.layers),
            built.input_name,
            built.label_name,
            x,
            y,
            on_epoch=on_epoch,
            out_dir=self.work_dir(),
        )
        loaded = load_weights(model, built, result.weights)
        return UpdateReport(built, list(result.epoch_losses), result.seconds, loaded)

    # ------------------------------------------------------------------ after training

    def export(self, model: nn.Module, sample_shape: tuple[int, ...], path: Path | str) -> ExportReport:
        """Write the trained model as an .mlpackage and, where Core ML can say, where it runs."""
        from trainpilot.backends.ane.convert import export_mlpackage
        from trainpilot.backends.ane.placement import summarize

        converted = export_mlpackage(model, sample_shape, path)
        avail = self.runtime.placement_availability()
        if not avail:
            return ExportReport(converted, None, f"placement n/a: {avail.reason}")
        report = summarize(self.runtime.compute_plan(converted.path))
        return ExportReport(converted, report, report.summary())


def sample_shape_of(inputs: Any) -> tuple[int, ...]:
    """One sample's shape from a numpy array or any indexable dataset."""
    shape = getattr(inputs, "shape", None)
    if shape is not None and len(shape) >= 2:
        return tuple(int(d) for d in shape[1:])
    if len(inputs) == 0:
        raise WorkloadError("no samples to compute features for")
    first = np.asarray(inputs[np.array([0])])
    return tuple(int(d) for d in first.shape[1:])
