"""A plan's memory format, applied to what trains: the model's 4-D weights, the optimizer state
beside them, and every 4-D input batch.

channels_last (NHWC) keeps a convolution's channels adjacent in memory; oneDNN and cuDNN have
kernels for it that may be faster or slower than the default NCHW ones, depending on the model,
the thread count and the machine (measured: docs/measurements.md#same-math-faster-plan_vs_defaultpy). The math is
the same either way: only strides change, so a switch mid-run keeps the loss trajectory.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from torch import nn

from trainpilot.plans import CHANNELS_LAST

_CONV2D = (nn.Conv2d, nn.ConvTranspose2d)


def torch_format(memory_format: str | None) -> torch.memory_format:
    return torch.channels_last if memory_format == CHANNELS_LAST else torch.contiguous_format


def layout_applies(model: nn.Module, batch: Any) -> bool:
    """Whether channels_last can matter: the model has a 2-D convolution and its input is a 4-D
    (N, C, H, W) floating-point tensor."""
    from trainpilot.job.profile_job import first_tensor

    x = first_tensor(batch)
    if x is None or x.ndim != 4 or not x.is_floating_point():
        return False
    return any(isinstance(m, _CONV2D) for m in model.modules())


def model_to_layout(model: nn.Module, memory_format: str | None) -> nn.Module:
    """`model` (in place) with its 4-D parameters and buffers in `memory_format`. The Parameter
    objects stay the same (their data is replaced), so an optimizer keeps pointing at them."""
    return model.to(memory_format=torch_format(memory_format))  # type: ignore[call-overload]


def optimizer_to_layout(optimizer: torch.optim.Optimizer, memory_format: str | None) -> None:
    """The optimizer's per-parameter state (Adam's moments, momentum) in the layout of its
    parameter: element-wise updates between tensors of different strides are correct but slow."""
    fmt = torch_format(memory_format)
    for state in optimizer.state.values():
        for key, value in list(state.items()):
            if isinstance(value, torch.Tensor) and value.ndim == 4:
                state[key] = value.contiguous(memory_format=fmt)


def batch_to_layout(batch: Any, memory_format: str | None) -> Any:
    """Every 4-D floating-point tensor of a batch in `memory_format` (targets and token ids are
    left alone); None leaves the batch exactly as loaded."""
    if memory_format is None:
        return batch
    fmt = torch_format(memory_format)
    return _convert(batch, fmt)


def _convert(value: Any, fmt: torch.memory_format) -> Any:
    if isinstance(value, torch.Tensor):
        return value.contiguous(memory_format=fmt) if value.ndim == 4 and value.is_floating_point() else value
    if isinstance(value, Mapping):
        return {k: _convert(v, fmt) for k, v in value.items()}
    if isinstance(value, tuple) and hasattr(value, "_fields"):
        return type(value)(*(_convert(v, fmt) for v in value))
    if isinstance(value, (tuple, list)):
        return type(value)(_convert(v, fmt) for v in value)
    return value
