"""Device backends, one module each, behind the protocol in `base`, found through `get_backend`.

The `split` backend (several of these at once) is composed above, in parallel/; the resolver a
session uses, which knows both, is `parallel.plan_backends`.

`ane` (Core ML) lives in its own module and imports coremltools only when it is used.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache

from trainpilot.backends.base import Backend, move_optimizer_state
from trainpilot.backends.cpu import CpuBackend
from trainpilot.backends.cuda import CudaBackend
from trainpilot.backends.mps import MpsBackend
from trainpilot.machine.probe import HardwareInfo, describe_machine

BACKEND_NAMES = ("cpu", "ane", "mps", "cuda")


@cache
def get_backend(name: str) -> Backend:
    if name == "cpu":
        return CpuBackend()
    if name == "cuda":
        return CudaBackend()
    if name == "mps":
        return MpsBackend()
    if name == "ane":
        from trainpilot.backends.ane import AneBackend

        return AneBackend()
    raise KeyError(f"unknown backend '{name}' (choose from {', '.join(BACKEND_NAMES)})")


BackendResolver = Callable[[str], Backend]


def all_backends() -> list[Backend]:
    return [get_backend(name) for name in BACKEND_NAMES]


def probe(include_backends: bool = True) -> HardwareInfo:
    """This machine (machine/probe.py) with each device backend's availability and the reason when not."""
    return describe_machine(all_backends() if include_backends else ())


__all__ = [
    "Backend",
    "BackendResolver",
    "BACKEND_NAMES",
    "all_backends",
    "get_backend",
    "move_optimizer_state",
    "probe",
]
