"""The one small protocol every execution backend implements.

A backend answers three questions — does it exist here (`availability`), can it run this workload
(`supports`), which plans does it offer (`plans`) — and does the few device-specific things the
generic training loop in `run/trainer.py` cannot: set threads, place tensors, synchronise for timing.
Anything that needs hardware we may not have stays inside the backend's own module.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Any, ClassVar

from trainpilot.plans import Availability, Plan

if TYPE_CHECKING:  # torch is imported lazily so `trainpilot --help` stays fast
    import torch

    from trainpilot.job.workload import WorkloadProfile


class Backend(ABC):
    name: ClassVar[str]
    title: ClassVar[str]  # what the UI calls it, e.g. "Apple Neural Engine (Core ML)"
    runs_on: ClassVar[str] = ""  # honest one-liner: where the training arithmetic actually runs

    @abstractmethod
    def availability(self) -> Availability:
        """Whether this machine has the hardware and runtime, with the reason when not."""

    def supports(self, profile: WorkloadProfile) -> Availability:
        """Whether this workload can train here; most backends run any PyTorch model."""
        return Availability(True)

    def supports_plan(self, profile: WorkloadProfile, plan: Plan) -> Availability:
        """Whether this one plan can run the workload (backends with several modes refine this)."""
        return self.supports(profile)

    @abstractmethod
    def plans(self, logical_cpus: int) -> list[Plan]:
        """The concrete plans this backend offers on this machine (only called when available)."""

    @abstractmethod
    def device(self, plan: Plan) -> torch.device:
        """The torch device that holds the trainable parameters under this plan."""

    def activate(self, plan: Plan) -> None:  # noqa: B027 - an optional hook: most backends need nothing here
        """Called when a plan takes effect (before its first step): threads, flags."""

    def synchronize(self, plan: Plan) -> None:  # noqa: B027 - an optional hook: most backends need nothing here
        """Block until queued device work is done, so wall-clock timings are honest."""

    def adapt_job(self, model: torch.nn.Module, inputs: Any, plan: Plan) -> tuple[torch.nn.Module, Any]:
        """Rewrite the job for this backend before training (e.g. the ANE's frozen backbone:
        features computed once on the Neural Engine, only the head trains). Identity by default."""
        return model, inputs

    def step_runner(self, model: torch.nn.Module, plan: Plan) -> Any:
        """A runner whose `forward_backward(...)` does the plan's forward and backward itself (the split: several
        workers per batch), or None: the trainer runs the step on `device(plan)` (most backends)."""
        return None

    def trains_whole_epochs(self, plan: Plan) -> bool:
        """Whether this plan trains an epoch in one call outside PyTorch (`train_epoch`) instead of
        step by step: no step events, and requests from other threads apply at epoch boundaries."""
        return False

    def train_epoch(self, model: torch.nn.Module, train_set: Any, *, batch_size: int, lr: float) -> float:
        """Train one epoch of `train_set` into `model` (only where `trains_whole_epochs`); the epoch's loss."""
        raise NotImplementedError(f"{self.name} trains step by step")

    def memory_budget_bytes(self, plan: Plan) -> int | None:
        """Memory the plan may use for training state, when known (None: no limit known)."""
        return None

    def describe(self) -> dict[str, Any]:
        avail = self.availability()
        return {
            "name": self.name,
            "title": self.title,
            "available": avail.available,
            "reason": avail.reason,
            "runs_on": self.runs_on,
        }


def move_optimizer_state(optimizer: torch.optim.Optimizer, device: torch.device) -> None:
    """Optimizer state (momentum, Adam moments) lives beside the parameters; it must follow them."""
    import torch

    for state in optimizer.state.values():
        for key, value in list(state.items()):
            if isinstance(value, torch.Tensor):
                state[key] = value.to(device)
