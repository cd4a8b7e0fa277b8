"""What the cost model reads from a workload profile: the numbers a step's time depends on.

The step-time model (see `roofline`) is linear in these features, so the same function serves the
calibration fit (profiles of the micro-benchmark models) and the prediction (the user's profile):
whatever `profile_model` counts or misses, it counts or misses the same way on both sides.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

KINDS = ("conv", "dense", "recurrent")

# Column order of the step-time model. The coefficients (one per column) are what calibration fits.
#   step      1 per optimizer step            -> seconds per step (Python, optimizer, batching)
#   layer     learnable layers per step       -> seconds per layer per step (kernel dispatch)
#   seq       recurrent layers x time steps   -> seconds per recurrent time step (sequential ops)
#   weights   weight bytes per step           -> seconds per weight byte (Adam reads/writes them)
#   conv/dense/recurrent  FLOPs per step      -> seconds per FLOP (1 / sustained FLOP/s)
#   activations  activation+input bytes/step  -> seconds per byte (element-wise memory traffic)
COLUMNS = ("step", "layer", "seq", "weights", "conv", "dense", "recurrent", "activations")


@dataclass(frozen=True)
class WorkFeatures:
    flops_by_kind: dict[str, float]  # forward+backward FLOPs per sample
    forward_flops: float  # forward FLOPs per sample
    layers: int
    recurrent_steps: int  # recurrent layers x sequence length (0 without recurrence)
    activation_bytes: float  # per sample, layer outputs plus the input itself
    weight_bytes: float
    params: int
    batch_size: int
    samples: int  # training samples per epoch
    steps: int  # optimizer steps per epoch
    epochs: int
    load_s_per_batch: float = 0.0  # loading one batch in the training process (data_pipeline.py)
    spawned_workers: bool = False  # DataLoader workers start by spawn here (an interpreter each)
    probe_step_s: float = 0.0  # a job's own training step timed on one thread (job/step_probe.py); 0: none
    probe_all_s: float = 0.0  # the same on `probe_threads` threads, timed on a quiet machine; 0: none
    probe_threads: int = 0
    # the job's step in other layouts / precisions against fp32 NCHW, probed before planning
    # (job/step_probe.probe_settings): {variant key: {threads: variant step / default step}}
    settings_ratios: dict[str, dict[int, float]] = field(default_factory=dict)

    @property
    def dominant_kind(self) -> str:
        return max(KINDS, key=lambda k: self.flops_by_kind.get(k, 0.0))

    @property
    def total_flops(self) -> float:
        return sum(self.flops_by_kind.values())

    def step_row(self, batch: int | None = None) -> list[float]:
        """One full step's feature vector in COLUMNS order (the batch defaults to the profile's)."""
        b = self.batch_size if batch is None else batch
        return [
            1.0,
            float(self.layers),
            float(self.recurrent_steps),
            self.weight_bytes,
            b * self.flops_by_kind.get("conv", 0.0),
            b * self.flops_by_kind.get("dense", 0.0),
            b * self.flops_by_kind.get("recurrent", 0.0),
            b * self.activation_bytes,
        ]

    def epoch_row(self) -> list[float]:
        """Feature vector of one epoch: per-step columns times steps, per-sample columns times
        samples (the last, smaller batch costs less compute but a whole step's overhead)."""
        per_step = [1.0, float(self.layers), float(self.recurrent_steps), self.weight_bytes]
        per_sample = self.step_row(batch=1)[4:]
        return [self.steps * v for v in per_step] + [self.samples * v for v in per_sample]


def _get(profile: Any, key: str, default: Any = None) -> Any:
    return profile.get(key, default) if isinstance(profile, dict) else getattr(profile, key, default)


def split_flops(profile: Any) -> dict[str, float]:
    """FLOPs per sample by layer kind.

    A profile that carries `extra["flops_by_kind"]` (counted per module) is used as is. Otherwise
    the split is estimated: a dense layer does ~6 FLOPs per weight per sample (2 forward, 4
    backward), so dense FLOPs are at most 6 x params; the rest belongs to the conv / recurrent
    layers (shared by layer count when both exist). For the zoo's models, whose dense part is a
    classifier head, this is within a few percent of a per-module count.
    """
    extra = _get(profile, "extra") or {}
    given = extra.get("flops_by_kind") if isinstance(extra, dict) else None
    if isinstance(given, dict) and given:
        return {k: float(given.get(k, 0.0)) for k in KINDS}
    total = float(_get(profile, "flops_per_sample", 0.0) or 0.0)
    kinds = dict(_get(profile, "layer_kinds", {}) or {})
    heavy = {k: kinds.get(k, 0) for k in ("conv", "recurrent") if kinds.get(k, 0)}
    if not heavy:
        return {"conv": 0.0, "dense": total, "recurrent": 0.0}
    params = float(_get(profile, "params", 0) or 0)
    dense = min(total, 6.0 * params) if kinds.get("dense") else 0.0
    rest = total - dense
    n = sum(heavy.values())
    out = {"conv": 0.0, "dense": dense, "recurrent": 0.0}
    for kind, count in heavy.items():
        out[kind] = rest * count / n
    return out


def sequence_length(input_shape: tuple[int, ...]) -> int:
    """Time steps an image or sequence is read in (as `workload.RecurrentNet` reads it)."""
    if len(input_shape) == 3:
        return int(input_shape[1])
    if len(input_shape) >= 1:
        return int(input_shape[0])
    return 1


def features_of(profile: Any, epochs: int | None = None) -> WorkFeatures:
    """Features of a `WorkloadProfile` (or its `to_dict()` form, as stored in the history)."""
    input_shape = tuple(int(d) for d in (_get(profile, "input_shape") or (1,)))
    kinds = dict(_get(profile, "layer_kinds", {}) or {})
    batch = max(int(_get(profile, "batch_size", 64) or 64), 1)
    samples = max(int(_get(profile, "dataset_size", 1) or 1), 1)
    recurrent_layers = 0
    extra = _get(profile, "extra") or {}
    if kinds.get("recurrent"):
        # nn.LSTM(num_layers=k) is one module; the profile may say how many stacked layers it has.
        modules: int = kinds["recurrent"]  # typed: with an Any default mypy reads extra.get as Optional
        recurrent_layers = int(extra.get("recurrent_layers", modules)) if isinstance(extra, dict) else modules
    return WorkFeatures(
        flops_by_kind=split_flops(profile),
        forward_flops=float(_get(profile, "forward_flops_per_sample", 0.0) or 0.0),
        layers=int(_get(profile, "layers", 0) or 0),
        recurrent_steps=recurrent_layers * sequence_length(input_shape) if recurrent_layers else 0,
        activation_bytes=float(_get(profile, "activation_bytes_per_sample", 0) or 0) + 4.0 * math.prod(input_shape),
        weight_bytes=float(_get(profile, "weight_bytes", 0) or 0),
        params=int(_get(profile, "params", 0) or 0),
        batch_size=batch,
        samples=samples,
        steps=max(1, math.ceil(samples / batch)),
        epochs=max(int(epochs if epochs is not None else (_get(profile, "epochs", 1) or 1)), 1),
        load_s_per_batch=float(_get(profile, "load_s_per_batch", 0.0) or 0.0),
        spawned_workers=_get(profile, "loader_start", "fork") == "spawn",
        probe_step_s=float(extra.get("probe_step_s", 0.0) or 0.0) if isinstance(extra, dict) else 0.0,
        probe_all_s=float(extra.get("probe_all_s", 0.0) or 0.0) if isinstance(extra, dict) else 0.0,
        probe_threads=int(extra.get("probe_threads", 0) or 0) if isinstance(extra, dict) else 0,
        settings_ratios=settings_ratios(extra.get("settings_probe") if isinstance(extra, dict) else None),
    )


def settings_ratios(probe: Any) -> dict[str, dict[int, float]]:
    """extra["settings_probe"] ({threads: {variant: ratio}}, JSON keys as text) by variant."""
    out: dict[str, dict[int, float]] = {}
    if not isinstance(probe, dict):
        return out
    for threads, ratios in probe.items():
        if not isinstance(ratios, dict):
            continue
        for key, ratio in ratios.items():
            if isinstance(ratio, (int, float)) and ratio > 0:
                out.setdefault(str(key), {})[int(threads)] = float(ratio)
    return out


def kind_breakdown(
    model: Any, flop_counts: dict[str, dict[Any, int]], samples: int, recurrent_forward_flops: float = 0.0
) -> dict[str, Any]:
    """What `workload.profile_model` can add to a profile's `extra` for the cost model, from the
    FlopCounterMode it already ran (no second pass):

        extra["flops_by_kind"]     forward+backward FLOPs per sample of conv / dense / recurrent layers
        extra["recurrent_layers"]  stacked recurrent layers (an nn.LSTM(num_layers=2) is 2), x2 if bidirectional

    `flop_counts` is `counter.get_flop_counts()` (keys "ClassName.sub.module"), `samples` the batch
    the pass ran on, `recurrent_forward_flops` the forward FLOPs the counter cannot see in fused
    RNN kernels (forward + a backward of twice the forward, as profile_model counts them)."""
    from torch import nn

    kinds = {"conv": 0.0, "dense": 0.0, "recurrent": 3.0 * recurrent_forward_flops}
    root = type(model).__name__
    recurrent_layers = 0
    for name, module in model.named_modules():
        if isinstance(module, (nn.LSTM, nn.GRU, nn.RNN)):
            recurrent_layers += module.num_layers * (2 if module.bidirectional else 1)
            continue
        kind = (
            "conv"
            if isinstance(
                module, (nn.Conv1d, nn.Conv2d, nn.Conv3d, nn.ConvTranspose1d, nn.ConvTranspose2d, nn.ConvTranspose3d)
            )
            else "dense"
            if isinstance(module, nn.Linear)
            else None
        )
        if kind is None:
            continue
        counts = flop_counts.get(f"{root}.{name}" if name else root, {})
        kinds[kind] += float(sum(counts.values()))
    per_sample = {k: v / max(samples, 1) for k, v in kinds.items()}
    return {"flops_by_kind": per_sample, "recurrent_layers": recurrent_layers}
