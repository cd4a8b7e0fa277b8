"""Execution backends, one module each, behind the protocol in `base`.

`ane` (Core ML) lives in its own module and imports coremltools only when it is used.
"""
from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Callable

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
    if name == "split":  # several workers at once (hetero/); offered by the agent beside BACKEND_NAMES
        from .split import SplitBackend

        return SplitBackend()
    raise KeyError(f"unknown backend '{name}' (choose from {', '.join(BACKEND_NAMES)})")


BackendResolver = Callable[[str], Backend]


def session_backends(freeze: int | None = None, work_dir: Path | None = None) -> BackendResolver:
    """The backends one session uses: the shared instances, except an ANE backend carrying this
    session's options (--freeze N, where its Core ML files go). The shared instance never changes."""
    if freeze is None and work_dir is None:
        return get_backend
    ane = get_backend("ane").with_options(freeze=freeze, work_dir=work_dir)  # type: ignore[attr-defined]

    def resolve(name: str) -> Backend:
        return ane if name == "ane" else get_backend(name)

    return resolve


def all_backends() -> list[Backend]:
    return [get_backend(name) for name in BACKEND_NAMES]


__all__ = ["Backend", "BackendResolver", "BACKEND_NAMES", "session_backends", "all_backends", "get_backend", "move_optimizer_state"]
