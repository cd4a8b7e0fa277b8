"""Workloads: real `torch.nn.Module`s built from a model config or a user's file, and their profile.

The profile is measured from the module itself — parameters counted, FLOPs counted by
`torch.utils.flop_counter` on a real forward+backward pass, activation bytes from forward hooks —
because the agent's predictions are only as good as these numbers.
"""

from __future__ import annotations

import importlib.util
import math
import sys
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

import torch
from torch import nn

from trainpilot.errors import WorkloadError
from trainpilot.job.model_names import DEFAULT_LAYERS, ZOO  # noqa: E402 - re-exported: the zoo's names live without torch


@dataclass(frozen=True)
class ModelSpec:
    """A model named by the zoo (`name`, `layers`, optional `width`) or by `path.py:ClassName`."""

    name: str
    layers: int
    width: int | None = None

    @classmethod
    def from_config(cls, config: dict[str, Any] | str) -> ModelSpec:
        if isinstance(config, str):
            config = {"name": config}
        if not isinstance(config, dict) or "name" not in config:
            raise WorkloadError("a model config needs a 'name' (one of " + ", ".join(ZOO) + " or path.py:ClassName)")
        name = str(config["name"])
        if _is_user_model(name):
            return cls(name=name, layers=0)
        if name not in ZOO:
            raise WorkloadError(
                f"unknown model '{name}': choose one of {', '.join(ZOO)} or give path/to/file.py:ClassName"
            )
        layers = config.get("layers", DEFAULT_LAYERS[name])
        if not isinstance(layers, int) or isinstance(layers, bool) or not 1 <= layers <= 64:
            raise WorkloadError(f"model '{name}': 'layers' must be an integer from 1 to 64, got {layers!r}")
        width = config.get("width")
        if width is not None and (not isinstance(width, int) or isinstance(width, bool) or not 1 <= width <= 65536):
            raise WorkloadError(f"model '{name}': 'width' must be an integer from 1 to 65536, got {width!r}")
        return cls(name=name, layers=layers, width=width)

    @property
    def is_user_model(self) -> bool:
        return _is_user_model(self.name)

    def to_config(self) -> dict[str, Any]:
        config: dict[str, Any] = {"name": self.name}
        if not self.is_user_model:
            config["layers"] = self.layers
        if self.width is not None:
            config["width"] = self.width
        return config


def _is_user_model(name: str) -> bool:
    return ":" in name and name.split(":", 1)[0].endswith(".py")


# ---------------------------------------------------------------- the zoo


class SmallCNN(nn.Module):
    """`layers` learnable layers: (layers-1) 3x3 conv blocks, then one linear classifier."""

    def __init__(self, in_shape: tuple[int, ...], num_classes: int, layers: int = 3, width: int | None = None):
        super().__init__()
        channels, height, width_px = _image_shape(in_shape)
        base = width or 16
        blocks: list[nn.Module] = []
        c_in, h, w = channels, height, width_px
        for i in range(max(layers - 1, 1)):
            c_out = base * (2 ** min(i, 2))
            blocks += [nn.Conv2d(c_in, c_out, 3, padding=1), nn.ReLU()]
            if h >= 4 and w >= 4 and i < 3:  # pool early blocks only, so deep stacks keep a spatial map
                blocks.append(nn.MaxPool2d(2))
                h, w = h // 2, w // 2
            c_in = c_out
        self.in_shape = (channels, height, width_px)
        self.features = nn.Sequential(*blocks)
        self.classifier = nn.Linear(c_in * h * w, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.reshape(x.shape[0], *self.in_shape)
        return self.classifier(torch.flatten(self.features(x), 1))


class WideCNN(nn.Module):
    """A wider conv net whose time is its convolutions: (layers-1) 3x3 conv-BatchNorm-ReLU blocks of
    `width` (default 32), 2x, 2x channels (then 2x again), max-pooled after the first two, global
    average pooling and one linear classifier. The head is tiny (channels x classes), so nearly all
    FLOPs and step time are in the convolutions: the model compression is measured on."""

    def __init__(self, in_shape: tuple[int, ...], num_classes: int, layers: int = 4, width: int | None = None):
        super().__init__()
        channels, height, width_px = _image_shape(in_shape)
        base = width or 32
        blocks: list[nn.Module] = []
        c_in, h, w = channels, height, width_px
        for i in range(max(layers - 1, 1)):
            c_out = base * (2 ** min(i, 1)) * (2 ** max(0, i - 2))
            blocks += [nn.Conv2d(c_in, c_out, 3, padding=1, bias=False), nn.BatchNorm2d(c_out), nn.ReLU()]
            if h >= 4 and w >= 4 and i < 2:
                blocks.append(nn.MaxPool2d(2))
                h, w = h // 2, w // 2
            c_in = c_out
        self.in_shape = (channels, height, width_px)
        self.features = nn.Sequential(*blocks)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.classifier = nn.Linear(c_in, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.reshape(x.shape[0], *self.in_shape)
        return self.classifier(torch.flatten(self.pool(self.features(x)), 1))


class DenseNet(nn.Module):
    """A plain multi-layer perceptron: `layers` Linear layers of `width` units (the last one classifies)."""

    def __init__(self, in_shape: tuple[int, ...], num_classes: int, layers: int, width: int):
        super().__init__()
        n_in = math.prod(in_shape)
        mods: list[nn.Module] = []
        for _ in range(layers - 1):
            mods += [nn.Linear(n_in, width), nn.ReLU()]
            n_in = width
        mods.append(nn.Linear(n_in, num_classes))
        self.net = nn.Sequential(*mods)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(torch.flatten(x, 1))


class RecurrentNet(nn.Module):
    """An LSTM classifier. Images are read row by row: (C, H, W) becomes H steps of C*W features."""

    def __init__(self, in_shape: tuple[int, ...], num_classes: int, layers: int, hidden: int):
        super().__init__()
        self.steps, self.features_per_step = _sequence_shape(in_shape)
        self.lstm = nn.LSTM(self.features_per_step, hidden, num_layers=layers, batch_first=True)
        self.head = nn.Linear(hidden, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.reshape(x.shape[0], self.steps, self.features_per_step)
        out, _ = self.lstm(x)
        return self.head(out[:, -1])


def _image_shape(in_shape: tuple[int, ...]) -> tuple[int, int, int]:
    if len(in_shape) == 3:
        return in_shape
    if len(in_shape) == 2:
        return (1, *in_shape)
    if len(in_shape) == 1:
        side = math.isqrt(in_shape[0])
        if side * side == in_shape[0]:
            return (1, side, side)
    raise WorkloadError(f"small_cnn needs image-shaped samples (H, W) or (C, H, W), got {in_shape}")


def _sequence_shape(in_shape: tuple[int, ...]) -> tuple[int, int]:
    if len(in_shape) == 3:
        c, h, w = in_shape
        return h, c * w
    if len(in_shape) == 2:
        return in_shape
    if len(in_shape) == 1:
        return in_shape[0], 1
    raise WorkloadError(f"rnn needs samples shaped (T, F), (C, H, W) or (F,), got {in_shape}")


def build_model(config: dict[str, Any] | str | ModelSpec, in_shape: tuple[int, ...], num_classes: int) -> nn.Module:
    """Build the real module. `in_shape` is one sample's shape, taken from the dataset."""
    spec = config if isinstance(config, ModelSpec) else ModelSpec.from_config(config)
    in_shape = tuple(int(d) for d in in_shape)
    if spec.is_user_model:
        return load_user_model(spec.name)
    if spec.name == "small_cnn":
        return SmallCNN(in_shape, num_classes, spec.layers, spec.width)
    if spec.name == "wide_cnn":
        return WideCNN(in_shape, num_classes, spec.layers, spec.width)
    if spec.name == "large_dense":
        return DenseNet(in_shape, num_classes, spec.layers, spec.width or 1024)
    if spec.name == "mlp":
        return DenseNet(in_shape, num_classes, spec.layers, spec.width or 128)
    return RecurrentNet(in_shape, num_classes, spec.layers, spec.width or 128)


def load_user_model(reference: str) -> nn.Module:
    """Import `path/to/file.py:ClassName` and instantiate it with no arguments.

    This runs the user's file as Python code with the user's rights, exactly like `python file.py`.
    """
    file_part, _, class_name = reference.rpartition(":")
    path = Path(file_part).expanduser()
    if not path.is_file():
        raise WorkloadError("model file not found", path)
    if not class_name.isidentifier():
        raise WorkloadError(f"'{class_name}' is not a class name (expected path.py:ClassName)", path)
    module_name = f"trainpilot_user_model_{abs(hash(str(path.resolve())))}"
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise WorkloadError("cannot be imported as a Python module", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except (Exception, SystemExit) as exc:  # the user's code: report, don't crash (nor exit with its code)
        sys.modules.pop(module_name, None)
        raise WorkloadError(f"importing it failed: {_one_line(exc)}", path) from exc
    cls = getattr(module, class_name, None)
    if cls is None:
        raise WorkloadError(f"defines no '{class_name}'", path)
    if not (isinstance(cls, type) and issubclass(cls, nn.Module)):
        raise WorkloadError(f"'{class_name}' is not a torch.nn.Module subclass", path)
    try:
        return cls()
    except (Exception, SystemExit) as exc:
        raise WorkloadError(f"{class_name}() failed (it must take no arguments): {_one_line(exc)}", path) from exc


def _one_line(exc: BaseException) -> str:
    if isinstance(exc, SystemExit):
        return f"it called sys.exit({exc.code!r})"
    first = (str(exc).strip().splitlines() or [""])[0][:200]
    return f"{type(exc).__name__}: {first}" if first else type(exc).__name__


# ---------------------------------------------------------------- profiling


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
    from torch.utils.flop_counter import FlopCounterMode

    input_shape = tuple(int(d) for d in input_shape)
    where = name.rpartition(":")[0] if _is_user_model(name) else None  # a user's file: name it in errors
    layers = _learnable_layers(model)
    kinds: dict[str, int] = {}
    for layer in layers:
        kinds[_kind(layer)] = kinds.get(_kind(layer), 0) + 1
    params = sum(p.numel() for p in model.parameters())
    weight_bytes = sum(p.numel() * p.element_size() for p in model.parameters())

    probe_batch = 2
    activation_bytes = 0

    def count_output(_m: nn.Module, _inp: Any, out: Any) -> None:
        nonlocal activation_bytes
        tensors = out if isinstance(out, (tuple, list)) else (out,)
        for t in tensors:
            if isinstance(t, torch.Tensor):
                activation_bytes += t.numel() * t.element_size()

    leaves = [m for m in model.modules() if not list(m.children())]
    hooks = [m.register_forward_hook(count_output) for m in leaves]
    was_training = model.training
    model.train()
    device = next((p.device for p in model.parameters()), torch.device("cpu"))
    x = torch.randn(probe_batch, *input_shape, device=device)
    try:
        with FlopCounterMode(display=False) as counter:
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
        raise WorkloadError(f"a forward/backward pass on input {input_shape} failed: {_one_line(exc)}", where) from exc
    finally:
        for h in hooks:
            h.remove()
        model.zero_grad(set_to_none=True)
        model.train(was_training)

    if out.shape[1] < 2:
        raise WorkloadError(f"the model outputs {out.shape[1]} logit(s); a classifier needs at least 2", where)
    steps = _sequence_shape(input_shape)[0] if kinds.get("recurrent") else 0
    rnn_fwd = _recurrent_flops(model, steps) * probe_batch if steps else 0.0
    forward_flops += rnn_fwd
    total_flops += rnn_fwd * 3  # backward of a matmul costs about twice its forward
    n_layers = max(len(layers), 1)
    return WorkloadProfile(
        model=name,
        params=params,
        layers=len(layers),
        depth=len(layers),
        has_conv=kinds.get("conv", 0) > 0,
        has_rnn=kinds.get("recurrent", 0) > 0,
        avg_layer_size=params / n_layers,
        layer_kinds=kinds,
        flops_per_sample=total_flops / probe_batch,
        forward_flops_per_sample=forward_flops / probe_batch,
        weight_bytes=weight_bytes,
        activation_bytes_per_sample=activation_bytes // probe_batch,
        input_shape=input_shape,
        num_classes=int(out.shape[1]) if num_classes <= 0 else num_classes,
        dataset_size=int(dataset_size),
        batch_size=int(batch_size),
        epochs=int(epochs),
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
