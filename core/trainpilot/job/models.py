"""The models a job trains: the zoo (built from a model config) and a user's own class
(`path/to/file.py:ClassName`), as real `torch.nn.Module`s."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from trainpilot.errors import WorkloadError
from trainpilot.job.model_names import DEFAULT_LAYERS, ZOO
from trainpilot.job.user_code import exception_line, import_file


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
        if is_user_model(name):
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
        return is_user_model(self.name)

    def to_config(self) -> dict[str, Any]:
        config: dict[str, Any] = {"name": self.name}
        if not self.is_user_model:
            config["layers"] = self.layers
        if self.width is not None:
            config["width"] = self.width
        return config


def is_user_model(name: str) -> bool:
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
        self.steps, self.features_per_step = sequence_shape(in_shape)
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


def sequence_shape(in_shape: tuple[int, ...]) -> tuple[int, int]:
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
    module = import_file(path, "trainpilot_user_model", WorkloadError)
    cls = getattr(module, class_name, None)
    if cls is None:
        raise WorkloadError(f"defines no '{class_name}'", path)
    if not (isinstance(cls, type) and issubclass(cls, nn.Module)):
        raise WorkloadError(f"'{class_name}' is not a torch.nn.Module subclass", path)
    try:
        return cls()
    except (Exception, SystemExit) as exc:
        raise WorkloadError(f"{class_name}() failed (it must take no arguments): {exception_line(exc)}", path) from exc
