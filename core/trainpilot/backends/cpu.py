"""The CPU backend: PyTorch on the host, with the intra-op thread count as part of the plan.

Threads matter: on a 2-core machine with one core kept busy by another process, 1 thread trains
faster than 2 (the second thread waits on a core it cannot get at every parallel region); idle,
2 threads win (measured: docs/prediction.md#plans-and-calibration, docs/measurements.md#cited-in-the-code-prediction).
So each thread count is its own plan, eager and compiled (torch.compile, see compiled.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from trainpilot.backends.base import Backend
from trainpilot.backends.compiled import COMPILED, compile_availability, compile_model
from trainpilot.plans import Availability, Plan

if TYPE_CHECKING:
    import torch


def thread_counts(logical_cpus: int) -> list[int]:
    """1, 2, 4, ... up to the core count, plus the core count itself."""
    counts, n = [], 1
    while n < logical_cpus:
        counts.append(n)
        n *= 2
    counts.append(max(logical_cpus, 1))
    return counts


class CpuBackend(Backend):
    name = "cpu"
    title = "CPU (PyTorch)"
    runs_on = "host CPU cores"

    def availability(self) -> Availability:
        return Availability(True)

    def plans(self, logical_cpus: int) -> list[Plan]:
        """Eager plans first (1 thread .. all), then the same thread counts compiled."""
        counts = thread_counts(logical_cpus)
        return [Plan("cpu", threads=t) for t in counts] + [Plan("cpu", threads=t, mode=COMPILED) for t in counts]

    def supports_plan(self, profile: Any, plan: Plan) -> Availability:
        if plan.is_compiled:
            return compile_availability()
        return self.supports(profile)

    def device(self, plan: Plan) -> torch.device:
        import torch

        return torch.device("cpu")

    def activate(self, plan: Plan) -> None:
        import torch

        if plan.threads:
            torch.set_num_threads(plan.threads)

    def adapt_job(self, model: torch.nn.Module, inputs: Any, plan: Plan) -> tuple[torch.nn.Module, Any]:
        if plan.is_compiled:
            return compile_model(model), inputs
        return model, inputs
