"""Execution backends, one module each, behind the protocol in `base`.

`ane` (Core ML) lives in its own module and imports coremltools only when it is used.
"""
from __future__ import annotations

from functools import lru_cache

from .base import Backend, move_optimizer_state
from .cpu import CpuBackend
from .cuda import CudaBackend
from .mps import MpsBackend

BACKEND_NAMES = ("cpu", "ane", "mps", "cuda")


@lru_cache(maxsize=None)
def get_backend(name: str) -> Backend:
    if name == "cpu":
        return CpuBackend()
    if name == "cuda":
        return CudaBackend()
    if name == "mps":
        return MpsBackend()
    if name == "ane":
        from .ane import AneBackend

        return AneBackend()
    raise KeyError(f"unknown backend '{name}' (choose from {', '.join(BACKEND_NAMES)})")


def all_backends() -> list[Backend]:
    return [get_backend(name) for name in BACKEND_NAMES]


__all__ = ["Backend", "BACKEND_NAMES", "all_backends", "get_backend", "move_optimizer_state"]
