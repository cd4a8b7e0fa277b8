"""Splitting a model into a frozen backbone (runs in Core ML) and a trainable head (PyTorch).

A split is only trusted after it is checked: `head(backbone(x))` must reproduce `model(x)` on a
probe batch. That check is what lets the same code accept the zoo models, plain `nn.Sequential`s
and user models that name a `backbone` and a `head`, without assuming how their forward() works.

The head shares its modules (and so its parameters) with the original model: training the head
trains the model, and the model is complete again after training.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from trainpilot.errors import WorkloadError


class Reshape(nn.Module):
    """Reshape each sample to a fixed shape (the zoo's SmallCNN does this first in forward())."""

    def __init__(self, shape: tuple[int, ...]):
        super().__init__()
        self.shape = tuple(int(d) for d in shape)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.reshape(x.shape[0], *self.shape)

    def extra_repr(self) -> str:
        return f"shape={self.shape}"


@dataclass
class Split:
    backbone: nn.Module  # frozen: converted to Core ML, run once over the data
    head: nn.Module  # trainable: consumes the backbone's output
    frozen_layers: int  # learnable layers inside the backbone
    trainable_layers: int  # learnable layers inside the head
    source: str  # "freeze=N" or "backbone/head attributes"

    def describe(self) -> str:
        return (
            f"{self.frozen_layers} frozen layer(s) run through Core ML, "
            f"{self.trainable_layers} trainable layer(s) train in PyTorch ({self.source})"
        )


def is_learnable(module: nn.Module) -> bool:
    return any(True for _ in module.parameters(recurse=False))


def _leaves(module: nn.Module) -> list[nn.Module]:
    """Execution-order leaves of nested Sequentials; any other module is kept whole."""
    if isinstance(module, nn.Sequential):
        out: list[nn.Module] = []
        for child in module:
            out.extend(_leaves(child))
        return out
    return [module]


def layer_sequence(model: nn.Module) -> list[nn.Module] | None:
    """The model as a flat list of modules applied in order, when its structure says so.

    Recognised: nn.Sequential; `features` + `classifier` (the zoo's SmallCNN, torchvision-style
    CNNs; a reshape to `in_shape` is prepended when the model has one); a single `net` Sequential
    (the zoo's DenseNet / mlp). The caller still verifies the result numerically.
    """
    if isinstance(model, nn.Sequential):
        return _leaves(model)
    features, classifier = getattr(model, "features", None), getattr(model, "classifier", None)
    if isinstance(features, nn.Module) and isinstance(classifier, nn.Module):
        steps: list[nn.Module] = []
        in_shape = getattr(model, "in_shape", None)
        if isinstance(in_shape, tuple) and in_shape:
            steps.append(Reshape(in_shape))
        return steps + _leaves(features) + [nn.Flatten(1)] + _leaves(classifier)
    net = getattr(model, "net", None)
    if isinstance(net, nn.Sequential):
        return [nn.Flatten(1)] + _leaves(net)
    return None


def count_learnable(modules: list[nn.Module]) -> int:
    return sum(1 for m in modules if any(True for _ in m.parameters()))


def split_sequence(steps: list[nn.Module], freeze: int) -> tuple[list[nn.Module], list[nn.Module]]:
    """Cut after the `freeze`-th learnable step, keeping the parameter-free steps that follow it
    (ReLU, pooling, flatten) in the backbone: they cost nothing to train and shrink the features."""
    total = count_learnable(steps)
    if not 1 <= freeze < total:
        raise WorkloadError(
            f"--freeze must be between 1 and {total - 1} for this model ({total} learnable layers), got {freeze}"
        )
    seen, cut = 0, len(steps)
    for i, step in enumerate(steps):
        if any(True for _ in step.parameters()):
            seen += 1
            if seen == freeze:
                cut = i + 1
                while cut < len(steps) and not any(True for _ in steps[cut].parameters()):
                    cut += 1
                break
    return steps[:cut], steps[cut:]


def _check_equivalent(model: nn.Module, backbone: nn.Module, head: nn.Module, sample_shape: tuple[int, ...]) -> None:
    was_training = model.training
    model.eval()
    try:
        x = torch.randn(3, *sample_shape, generator=torch.Generator().manual_seed(0))
        with torch.no_grad():
            expected = model(x)
            got = head(backbone(x))
    except Exception as exc:  # a user's model that does not compose: say so, no traceback
        raise WorkloadError(f"the model cannot be split into backbone and head: {type(exc).__name__}: {exc}") from exc
    finally:
        model.train(was_training)
    if (
        not isinstance(expected, torch.Tensor)
        or expected.shape != got.shape
        or not torch.allclose(expected, got, atol=1e-5, rtol=1e-4)
    ):
        raise WorkloadError("the model's forward() is not head(backbone(x)); cannot freeze a backbone safely")


def split_model(model: nn.Module, sample_shape: tuple[int, ...], freeze: int | None = None) -> Split:
    """Split by `freeze` (learnable layers to freeze) or, when it is None, by the model's own
    `backbone` and `head` attributes. Raises WorkloadError with the reason when neither works."""
    sample_shape = tuple(int(d) for d in sample_shape)
    if freeze is None:
        backbone, head = getattr(model, "backbone", None), getattr(model, "head", None)
        if not (isinstance(backbone, nn.Module) and isinstance(head, nn.Module)):
            raise WorkloadError("frozen-backbone mode needs --freeze N or a model with `backbone` and `head` modules")
        _check_equivalent(model, backbone, head, sample_shape)
        return Split(backbone, head, _count_modules(backbone), _count_modules(head), "backbone/head attributes")
    steps = layer_sequence(model)
    if steps is None:
        raise WorkloadError(
            f"cannot freeze layers of {type(model).__name__}: its layers are not a sequence "
            "(use nn.Sequential, features+classifier, or give it `backbone` and `head` modules)"
        )
    front, back = split_sequence(steps, freeze)
    backbone, head = nn.Sequential(*front), nn.Sequential(*back)
    _check_equivalent(model, backbone, head, sample_shape)
    return Split(backbone, head, count_learnable(front), count_learnable(back), f"freeze={freeze}")


def _count_modules(module: nn.Module) -> int:
    return sum(1 for m in module.modules() if is_learnable(m))


def freeze_parameters(module: nn.Module) -> None:
    for p in module.parameters():
        p.requires_grad_(False)


def output_shape(module: nn.Module, sample_shape: tuple[int, ...]) -> tuple[int, ...]:
    """One sample's output shape, measured on a real forward pass."""
    was_training = module.training
    module.eval()
    try:
        with torch.no_grad():
            out: Any = module(torch.zeros(1, *sample_shape))
    finally:
        module.train(was_training)
    return tuple(int(d) for d in out.shape[1:])
