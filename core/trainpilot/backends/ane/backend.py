"""Apple Neural Engine through Core ML. No public Apple API trains on the ANE; see the package docs."""
from __future__ import annotations

import platform

from ...plans import Availability, Plan
from ..base import Backend


class AneBackend(Backend):
    name = "ane"
    title = "Apple Neural Engine (Core ML)"
    runs_on = "Core ML decides placement (ANE / GPU / CPU); PyTorch trains the head on the CPU"

    def availability(self) -> Availability:
        if platform.system() != "Darwin" or platform.machine() != "arm64":
            return Availability(False, "not Apple Silicon")
        return Availability(False, "Core ML training modes are not built yet")

    def plans(self, logical_cpus: int) -> list[Plan]:
        return [Plan("ane", mode="frozen-backbone")]

    def device(self, plan: Plan):  # type: ignore[no-untyped-def]
        import torch

        return torch.device("cpu")
