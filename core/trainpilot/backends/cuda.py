"""The CUDA backend: PyTorch on an NVIDIA GPU. Model, optimizer state and batches move to the device."""

from __future__ import annotations

from typing import TYPE_CHECKING

from trainpilot.backends.base import Backend
from trainpilot.plans import Availability, Plan

if TYPE_CHECKING:
    import torch


class CudaBackend(Backend):
    name = "cuda"
    title = "NVIDIA GPU (CUDA)"
    runs_on = "NVIDIA GPU"

    def availability(self) -> Availability:
        import torch

        if not torch.backends.cuda.is_built():
            return Availability(False, "this PyTorch build has no CUDA support")
        try:
            count = torch.cuda.device_count()
        except Exception as exc:  # driver problems surface here
            return Availability(False, f"CUDA driver error: {exc}")
        if count == 0:
            return Availability(False, "no CUDA device found")
        return Availability(True)

    def plans(self, logical_cpus: int) -> list[Plan]:
        import torch

        return [Plan("cuda", device=f"cuda:{i}") for i in range(torch.cuda.device_count())]

    def device(self, plan: Plan) -> torch.device:
        import torch

        return torch.device(plan.device or "cuda:0")

    def synchronize(self, plan: Plan) -> None:
        import torch

        torch.cuda.synchronize(self.device(plan))

    def memory_budget_bytes(self, plan: Plan) -> int | None:
        import torch

        free, _total = torch.cuda.mem_get_info(self.device(plan))
        return int(free)
