"""What runs where: a TrainPilot plan as a Lightning Trainer's `accelerator` and `devices`, the plan
a running Trainer is on, and the agent's prediction for that plan.

A single-device Trainer runs the eager CPU plan (its threads are the process's torch threads, which
Lightning leaves alone), one CUDA device, or MPS. The split, Core ML and torch.compile plans are
TrainPilot's own training loops: Lightning cannot run them as they were predicted. Nor does a Trainer
put a module in channels_last or under autocast on TrainPilot's say, so `choose` plans in PyTorch's
layout and fp32: the Trainer's own `precision=` stays the user's choice. A fit in "bf16-mixed" or
"16-mixed" is autocast, as TrainPilot's bf16/fp16 plans are, so the callback predicts the fit in
that precision; the "-true" precisions cast the weights, which no plan does (predicted as fp32).
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
    "fit_precision",
    "plan_of_device",
    "prediction_of",
    "row_for",
    "runnable",
    "trainer_arguments",
]

LIGHTNING_BACKENDS = ("cpu", "cuda", "mps")


# Lightning's precision= that is autocast, as a TrainPilot plan's precision is
_AUTOCAST = {"bf16-mixed": "bf16", "16-mixed": "fp16"}


def fit_precision(trainer_precision: object) -> tuple[str | None, str | None]:
    """(the plan's precision, a note where the Trainer's precision is none TrainPilot predicts) for
    a Trainer's `precision` ("32-true", "bf16-mixed", ...)."""
    text = str(trainer_precision)
    if text in _AUTOCAST:
        return _AUTOCAST[text], None
    if text in ("32-true", "32", "None"):
        return None, None
    return None, f"Lightning's precision={text!r} is not a plan TrainPilot predicts: predicted as fp32"


def runnable(plan: Plan, precision: str | None = None) -> bool:
    """Whether a single-device Lightning Trainer given `precision` (the plan's form of its own
    precision=: None for fp32) runs `plan` as TrainPilot predicted it."""
    return (
        plan.backend in LIGHTNING_BACKENDS
        and plan.mode is None
        and not plan.memory_format
        and (plan.precision or None) == precision
    )


def trainer_arguments(plan: Plan) -> dict[str, Any]:
    """`Trainer(**trainer_arguments(plan))`: CPU and MPS as one device (for the CPU, Lightning's
    `devices` counts processes), CUDA as the list of the one device index."""
    if not runnable(plan, plan.precision):
        raise ValueError(f"a Lightning Trainer cannot run the plan {plan.label}")
    if plan.backend == "cuda":
        return {"accelerator": "cuda", "devices": [cuda_index(plan.device)]}
    return {"accelerator": plan.backend, "devices": 1}


def best_runnable(
    rows: Sequence[dict[str, Any]], objective: str, precision: str | None = None
) -> dict[str, Any] | None:
    """The row a Lightning Trainer given `precision` can run that is best by `objective` (None: no
    such row predicted)."""
    return best_row(rows, objective, lambda plan: runnable(plan, precision))
