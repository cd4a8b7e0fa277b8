"""What runs where: a TrainPilot plan as a Lightning Trainer's `accelerator` and `devices`, the plan
a running Trainer is on, and the agent's prediction for that plan.

A single-device Trainer runs the eager CPU plan (its threads are the process's torch threads, which
Lightning leaves alone), one CUDA device, or MPS. The split, Core ML and torch.compile plans are
TrainPilot's own training loops: Lightning cannot run them as they were predicted. Nor does a Trainer
put a module in channels_last or under autocast on TrainPilot's say, so Lightning is planned in
PyTorch's layout and fp32 (its own `precision=` stays the user's choice).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from trainpilot.hosted.plan_rows import best_row, cuda_index, plan_of_device, prediction_of, row_for
from trainpilot.plans import Plan

# the plan <-> device pieces every host shares live in trainpilot.hosted.plan_rows; named here too, as before
__all__ = [
    "LIGHTNING_BACKENDS",
    "best_runnable",
    "cuda_index",
    "plan_of_device",
    "prediction_of",
    "row_for",
    "runnable",
    "trainer_arguments",
]

LIGHTNING_BACKENDS = ("cpu", "cuda", "mps")


def runnable(plan: Plan) -> bool:
    """Whether a single-device Lightning Trainer runs `plan` as TrainPilot predicted it."""
    return plan.backend in LIGHTNING_BACKENDS and plan.mode is None and not plan.memory_format and not plan.precision


def trainer_arguments(plan: Plan) -> dict[str, Any]:
    """`Trainer(**trainer_arguments(plan))`: CPU and MPS as one device (for the CPU, Lightning's
    `devices` counts processes), CUDA as the list of the one device index."""
    if not runnable(plan):
        raise ValueError(f"a Lightning Trainer cannot run the plan {plan.label}")
    if plan.backend == "cuda":
        return {"accelerator": "cuda", "devices": [cuda_index(plan.device)]}
    return {"accelerator": plan.backend, "devices": 1}


def best_runnable(rows: Sequence[dict[str, Any]], objective: str) -> dict[str, Any] | None:
    """The row a Lightning Trainer can run that is best by `objective` (None: no such row predicted)."""
    return best_row(rows, objective, runnable)
