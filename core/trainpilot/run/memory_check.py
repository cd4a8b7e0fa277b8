"""Will the job fit? The predicted memory of a training step against what the plan's device (or
this machine) has free, checked before training starts so a too-large job is refused with the
figure instead of failing half way."""

from __future__ import annotations

from typing import Any

from trainpilot.errors import InsufficientMemory
from trainpilot.plans import Plan


def check_memory(plan: Plan, profile: Any, dataset: Any, backend: Any) -> None:
    """Refuse, before training starts, a plan whose step would not fit: the predicted need against
    the backend's budget (a device's free memory) or, on the host, the memory available now (the
    dataset is already loaded or memory-mapped, so it is part of what is used, not of the need)."""
    from trainpilot.job.data import available_memory_bytes
    from trainpilot.job.workload import training_memory
    from trainpilot.units import bytes_decimal

    estimate = training_memory(profile)
    budget = backend.memory_budget_bytes(plan)
    where = f"{plan.short_label}'s memory" if budget is not None else "memory available"
    if budget is None:
        budget = available_memory_bytes()
    if estimate.total > budget:
        source = dataset.source if dataset.source not in ("demo", "arrays") else None
        raise InsufficientMemory(
            f"training {profile.model} on {profile.dataset_size} samples with {plan.short_label}"
            f" needs about {bytes_decimal(estimate.total)}"
            f" ({estimate.describe()}), more than the {bytes_decimal(budget)} of {where}; try a smaller --batch-size",
            source,
        )
