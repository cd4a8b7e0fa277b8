"""A backend that fails on cue: the device faults TrainPilot must survive, without the device.

`FlakyBackend` claims to be the CUDA backend (available, one device) but computes on the CPU with
one thread, so a run on it is bit-for-bit the same as a CPU run until the fault. Faults:

  "step":     the k-th training forward pass first damages the weights in place (what a kernel
              that died half way through the optimizer update leaves behind), then raises
              "CUDA error: an illegal memory access was encountered".
  "nan":      the k-th forward pass returns NaN logits (a device whose arithmetic went wrong);
              the optimizer then writes NaNs into the weights.
  "move":     moving the job onto the device damages the weights, then raises "CUDA out of memory".
  "sync":     the k-th synchronize (epoch end, or leaving the device) raises.
  "convert":  like "move", but raising a conversion error (a Core ML conversion that fails).
"""
from __future__ import annotations

from typing import Any, Callable

import torch
from torch import nn

from trainpilot.backends.cpu import CpuBackend
from trainpilot.plans import Availability, Plan

DEVICE_ERROR = "CUDA error: an illegal memory access was encountered"


class DeviceFault(RuntimeError):
    pass


class _Faulty(nn.Module):
    def __init__(self, inner: nn.Module, backend: "FlakyBackend"):
        super().__init__()
        self.inner, self.backend = inner, backend

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.inner(x)
        if not self.training:
            return out
        self.backend.forward_calls += 1
        if self.backend.forward_calls == self.backend.at:
            if self.backend.fault == "step":
                damage(self.inner)
                raise DeviceFault(DEVICE_ERROR)
            if self.backend.fault == "nan":
                return out * float("nan")
        return out


def damage(model: nn.Module) -> None:
    """Half the parameters get garbage, the rest are left alone: a half-done update."""
    with torch.no_grad():
        params = list(model.parameters())
        for p in params[: max(1, len(params) // 2)]:
            p.add_(torch.randn_like(p))


class FlakyBackend(CpuBackend):
    name = "cuda"
    title = "flaky test device"

    def __init__(self, fault: str, at: int = 1):
        self.fault, self.at = fault, at
        self.forward_calls = self.sync_calls = self.moves = 0

    def availability(self) -> Availability:
        return Availability(True)

    def plans(self, logical_cpus: int) -> list[Plan]:
        return [Plan("cuda", device="cuda:0")]

    def activate(self, plan: Plan) -> None:
        torch.set_num_threads(1)

    def synchronize(self, plan: Plan) -> None:
        self.sync_calls += 1
        if self.fault == "sync" and self.sync_calls == self.at:
            raise DeviceFault("CUDA error: unspecified launch failure")

    def adapt_job(self, model: nn.Module, inputs: Any, plan: Plan) -> tuple[nn.Module, Any]:
        self.moves += 1
        if self.fault in ("move", "convert") and self.moves == self.at:
            damage(model)
            if self.fault == "move":
                raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
            raise ValueError("Core ML conversion failed: unsupported op 'aten::unflatten'")
        return _Faulty(model, self), inputs


def install(backend: FlakyBackend) -> Callable[[], None]:
    """Make get_backend("cuda") return `backend` everywhere the core looks it up; returns the undo."""
    import trainpilot.backends as backends

    original = backends.get_backend

    def get_backend(name: str):  # type: ignore[no-untyped-def]
        return backend if name == "cuda" else original(name)

    backends.get_backend = get_backend  # type: ignore[assignment]

    def undo() -> None:
        backends.get_backend = original  # type: ignore[assignment]

    return undo
