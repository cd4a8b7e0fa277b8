"""The MPS backend: PyTorch on the Apple GPU through Metal Performance Shaders."""

from __future__ import annotations

import platform
from typing import TYPE_CHECKING

from trainpilot.backends.base import Backend
from trainpilot.plans import Availability, Plan

if TYPE_CHECKING:
    import torch


class MpsBackend(Backend):
    name = "mps"
    title = "Apple GPU (Metal / MPS)"
    runs_on = "Apple GPU"

    def availability(self) -> Availability:
        import torch

        if platform.system() != "Darwin":
            return Availability(False, "not macOS")
        if not torch.backends.mps.is_built():
            return Availability(False, "this PyTorch build has no MPS support")
        if not torch.backends.mps.is_available():
            return Availability(False, "MPS not available (needs Apple Silicon and macOS 12.3+)")
        return Availability(True)

    def plans(self, logical_cpus: int) -> list[Plan]:
        return [Plan("mps", device="mps")]

    def device(self, plan: Plan) -> torch.device:
        import torch

        return torch.device("mps")

    def synchronize(self, plan: Plan) -> None:
        import torch

        torch.mps.synchronize()
