"""A plan's precision, applied to a training step: autocast around the forward pass and the loss
(weights, gradients and optimizer state stay fp32: mixed precision), and for fp16 a gradient
scaler, since fp16 gradients underflow where bf16's do not.

Whether a device runs bf16 or fp16 natively is machine/precision_support.py's question; this
module runs whatever plan it is given.
"""

from __future__ import annotations

import contextlib
from typing import Any

import torch

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}


def autocast(device: torch.device, precision: str | None) -> contextlib.AbstractContextManager[Any]:
    """The context a step's forward and loss run in: autocast to the plan's dtype, or nothing."""
    dtype = DTYPES.get(precision or "")
    if dtype is None:
        return contextlib.nullcontext()
    return torch.autocast(device_type=device.type, dtype=dtype)


def grad_scaler(device: torch.device, precision: str | None) -> torch.amp.GradScaler | None:
    """A gradient scaler for fp16 (None otherwise: bf16 has fp32's exponent range)."""
    if precision != "fp16":
        return None
    return torch.amp.GradScaler(device.type)
