"""A job's workload profile: what the agent knows before running it.

The profile is measured from the module itself — parameters counted, FLOPs counted by
`torch.utils.flop_counter` on a real forward+backward pass, activation bytes from forward hooks —
because the agent's predictions are only as good as these numbers.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, fields
from typing import Any

import torch
from torch import nn

from trainpilot.errors import WorkloadError
from trainpilot.job.models import is_user_model, sequence_shape
from trainpilot.job.user_code import exception_line


@dataclass(frozen=True)
class WorkloadProfile:
    """What the agent knows about a job before running it. Every number is measured from the module."""

    model: str
    params: int
    layers: int  # learnable layers (modules that own parameters)
    depth: int  # same count; kept under the seed API's name
    has_conv: bool
    has_rnn: bool
    avg_layer_size: float  # parameters per learnable layer
    layer_kinds: dict[str, int]
    flops_per_sample: float  # forward + backward, counted on a real pass
    forward_flops_per_sample: float
    weight_bytes: int
    activation_bytes_per_sample: int
    input_shape: tuple[int, ...]
    num_classes: int
    dataset_size: int
    batch_size: int = 64
    epochs: int = 1
    extra: dict[str, Any] = field(default_factory=dict)
    # The data pipeline (job/batches.py): seconds to load one batch in the training process (0 for
    # in-memory tensors: the calibrated step holds their indexing), and who may load it: "memory"
    # (no workers), "workers" (DataLoader workers can), "in-process" (they cannot: see
    # `loader_note`), or "pinned" (the job fixed `pinned_workers`).
    load_s_per_batch: float = 0.0
    loader: str = "memory"
    pinned_workers: int | None = None
    loader_note: str = ""
    loader_start: str = (
        "fork"  # how DataLoader workers start here: "fork" (milliseconds) or "spawn" (an interpreter each)
    )

    @property
    def steps_per_epoch(self) -> int:
        return max(1, math.ceil(self.dataset_size / self.batch_size))

    @property
    def footprint(self) -> str:
        """A short key that identifies the workload's shape for history lookups (StarPU-style)."""
        kinds = "".join(f"{k[0]}{v}" for k, v in sorted(self.layer_kinds.items()) if v)
        shape = "x".join(str(d) for d in self.input_shape)
        return f"{self.model.split(':')[-1]}|p{self.params}|{kinds}|in{shape}|b{self.batch_size}"

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["input_shape"] = list(self.input_shape)
        data["steps_per_epoch"] = self.steps_per_epoch
        data["footprint"] = self.footprint
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> WorkloadProfile:
        """The profile a history row stored with `to_dict` (its derived keys are left out)."""
        known = {f.name for f in fields(cls)}
        values = {k: v for k, v in data.items() if k in known}
        values["input_shape"] = tuple(int(d) for d in values.get("input_shape", ()))
        return cls(**values)


_KIND_OF = (
    ((nn.Conv1d, nn.Conv2d, nn.Conv3d, nn.ConvTranspose2d), "conv"),
    ((nn.LSTM, nn.GRU, nn.RNN), "recurrent"),
    ((nn.Linear,), "dense"),
    ((nn.BatchNorm1d, nn.BatchNorm2d, nn.LayerNorm, nn.GroupNorm), "norm"),
    ((nn.Embedding,), "embedding"),
    ((nn.MultiheadAttention,), "attention"),
)


# Layers whose training-mode output depends on the rest of the batch or on a random draw: a shard
# of the batch would not compute what the whole batch computes, so a split would not be the same step.
BATCH_DEPENDENT = (
    nn.modules.batchnorm._BatchNorm,
    nn.modules.dropout._DropoutNd,
    nn.AlphaDropout,
    nn.FeatureAlphaDropout,
)


def batch_dependent_layers(model: nn.Module) -> list[str]:
    return [
        f"{name or type(m).__name__} ({type(m).__name__})"
        for name, m in model.named_modules()
        if isinstance(m, BATCH_DEPENDENT)
    ]


def _kind(module: nn.Module) -> str:
    for types, kind in _KIND_OF:
        if isinstance(module, types):
            return kind
    return "other"


def _learnable_layers(model: nn.Module) -> list[nn.Module]:
    layers = []
    for module in model.modules():
        own = list(module.parameters(recurse=False))
        if own and _kind(module) != "other" or (own and not list(module.children())):
            layers.append(module)
    return layers


def _recurrent_flops(model: nn.Module, steps: int) -> float:
    """FLOPs of recurrent layers, forward only. The flop counter does not see fused RNN kernels."""
    total = 0.0
    for module in model.modules():
        if isinstance(module, (nn.LSTM, nn.GRU, nn.RNN)):
            gates = {nn.LSTM: 4, nn.GRU: 3}.get(type(module), 1)
            dirs = 2 if module.bidirectional else 1
            n_in = module.input_size
            for _ in range(module.num_layers):
                total += dirs * steps * 2 * gates * module.hidden_size * (n_in + module.hidden_size)
                n_in = module.hidden_size * dirs
    return total


def _conv_backward_flops(
    grad_out_shape: Any,
    x_shape: Any,
    w_shape: Any,
    _bias: Any,
    _stride: Any,
    _padding: Any,
    _dilation: Any,
    transposed: bool,
    _output_padding: Any,
    _groups: Any,
    output_mask: Any,
    out_shape: Any = None,
    **_kwargs: Any,
) -> int:
    """A convolution's backward: each gradient (input, weight) costs what the forward does.
    torch.utils.flop_counter's own formula drops `groups` from the weight gradient, counting a
    depthwise convolution's backward ~channels times too high (MobileNet's: 60x its forward)."""
    from torch.utils.flop_counter import conv_flop_count

    forward = conv_flop_count(list(x_shape), list(w_shape), list(grad_out_shape), transposed)
    return forward * (int(bool(output_mask[0])) + int(bool(output_mask[1])))


def flop_counter() -> Any:
    """A FlopCounterMode that counts grouped convolutions' backward right."""
    from torch.utils.flop_counter import FlopCounterMode

    return FlopCounterMode(display=False, custom_mapping={torch.ops.aten.convolution_backward: _conv_backward_flops})


class ActivationMeter:
    """Bytes of every leaf module's outputs during the passes inside it: the activations a backward
    pass keeps."""

    def __init__(self, model: nn.Module):
        self.model, self.bytes, self._hooks = model, 0, []  # type: ignore[var-annotated]

    def _count(self, _m: nn.Module, _inp: Any, out: Any) -> None:
        for t in out if isinstance(out, (tuple, list)) else (out,):
            if isinstance(t, torch.Tensor):
                self.bytes += t.numel() * t.element_size()

    def __enter__(self) -> ActivationMeter:
        leaves = [m for m in self.model.modules() if not list(m.children())]
        self._hooks = [m.register_forward_hook(self._count) for m in leaves]
        return self

    def __exit__(self, *exc: Any) -> None:
        for h in self._hooks:
            h.remove()


def layer_census(model: nn.Module) -> tuple[list[nn.Module], dict[str, int]]:
    """The learnable layers and their count by kind."""
    layers = _learnable_layers(model)
    kinds: dict[str, int] = {}
    for layer in layers:
        kinds[_kind(layer)] = kinds.get(_kind(layer), 0) + 1
    return layers, kinds


def assemble_profile(
    model: nn.Module,
    *,
    name: str,
    probe: int,
    forward_flops: float,
    total_flops: float,
    activation_bytes: int,
    input_shape: tuple[int, ...],
    recurrent_steps: int,
    num_classes: int,
    dataset_size: int,
    batch_size: int,
    epochs: int,
) -> WorkloadProfile:
    """The profile of `model` from what one pass of `probe` samples counted. Recurrent layers'
    FLOPs are added here: the flop counter does not see fused RNN kernels."""
    layers, kinds = layer_census(model)
    params = sum(p.numel() for p in model.parameters())
    rnn_fwd = _recurrent_flops(model, recurrent_steps) * probe if recurrent_steps else 0.0
    forward_flops += rnn_fwd
    total_flops += rnn_fwd * 3  # backward of a matmul costs about twice its forward
    return WorkloadProfile(
        model=name,
        params=params,
        layers=len(layers),
        depth=len(layers),
        has_conv=kinds.get("conv", 0) > 0,
        has_rnn=kinds.get("recurrent", 0) > 0,
        avg_layer_size=params / max(len(layers), 1),
        layer_kinds=kinds,
        flops_per_sample=total_flops / probe,
        forward_flops_per_sample=forward_flops / probe,
        weight_bytes=sum(p.numel() * p.element_size() for p in model.parameters()),
        activation_bytes_per_sample=activation_bytes // probe,
        input_shape=input_shape,
        num_classes=num_classes,
        dataset_size=int(dataset_size),
        batch_size=int(batch_size),
        epochs=int(epochs),
        # what a plan that shards the batch must know before it is offered (parallel/split_backend.py)
        extra={"batch_dependent": batch_dependent_layers(model)},
    )


def profile_model(
    model: nn.Module,
    input_shape: tuple[int, ...],
    num_classes: int,
    dataset_size: int,
    *,
    name: str = "model",
    batch_size: int = 64,
    epochs: int = 1,
) -> WorkloadProfile:
    """Count parameters, layers, FLOPs and bytes on a real forward+backward pass of 2 samples."""
    input_shape = tuple(int(d) for d in input_shape)
    where = name.rpartition(":")[0] if is_user_model(name) else None  # a user's file: name it in errors
    probe_batch = 2
    was_training = model.training
    model.train()
    device = next((p.device for p in model.parameters()), torch.device("cpu"))
    x = torch.randn(probe_batch, *input_shape, device=device)
    try:
        with flop_counter() as counter, ActivationMeter(model) as activations:
            out = model(x)
            if not isinstance(out, torch.Tensor) or out.ndim != 2 or out.shape[0] != probe_batch:
                raise WorkloadError(
                    f"the model must map a batch of shape (N, {', '.join(map(str, input_shape))})"
                    " to logits (N, classes);"
                    f" it returned {tuple(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__}",
                    where,
                )
            forward_flops = counter.get_total_flops()
            out.float().logsumexp(dim=1).sum().backward()
            total_flops = counter.get_total_flops()
    except WorkloadError:
        raise
    except Exception as exc:
        raise WorkloadError(
            f"a forward/backward pass on input {input_shape} failed: {exception_line(exc)}", where
        ) from exc
    finally:
        model.zero_grad(set_to_none=True)
        model.train(was_training)

    if out.shape[1] < 2:
        raise WorkloadError(f"the model outputs {out.shape[1]} logit(s); a classifier needs at least 2", where)
    kinds = layer_census(model)[1]
    return assemble_profile(
        model,
        name=name,
        probe=probe_batch,
        forward_flops=forward_flops,
        total_flops=total_flops,
        activation_bytes=activations.bytes,
        input_shape=input_shape,
        recurrent_steps=sequence_shape(input_shape)[0] if kinds.get("recurrent") else 0,
        num_classes=int(out.shape[1]) if num_classes <= 0 else num_classes,
        dataset_size=dataset_size,
        batch_size=batch_size,
        epochs=epochs,
    )


# ---------------------------------------------------------------- memory


@dataclass(frozen=True)
class MemoryEstimate:
    """Bytes a training step needs, by part. Adam keeps two moments per weight; a backward pass
    keeps every activation of the batch and creates a gradient of the same size."""

    weights: int
    gradients: int
    optimizer: int
    activations: int
    batch: int
    batch_size: int

    @property
    def total(self) -> int:
        return self.weights + self.gradients + self.optimizer + self.activations + self.batch

    def describe(self) -> str:
        from trainpilot.units import bytes_decimal

        return (
            f"weights {bytes_decimal(self.weights)}, gradients {bytes_decimal(self.gradients)},"
            f" optimizer {bytes_decimal(self.optimizer)},"
            f" activations {bytes_decimal(self.activations)} at batch {self.batch_size},"
            f" batch data {bytes_decimal(self.batch)}"
        )


def training_memory(
    profile: WorkloadProfile, batch_size: int | None = None, optimizer_slots: int = 2
) -> MemoryEstimate:
    """The memory one training step of `profile` needs (the dataset itself is counted by `data`)."""
    batch_size = int(batch_size or profile.batch_size)
    return MemoryEstimate(
        weights=profile.weight_bytes,
        gradients=profile.weight_bytes,
        optimizer=optimizer_slots * profile.weight_bytes,
        activations=2 * profile.activation_bytes_per_sample * batch_size,
        batch=4 * math.prod(profile.input_shape) * batch_size + 8 * batch_size,
        batch_size=batch_size,
    )
