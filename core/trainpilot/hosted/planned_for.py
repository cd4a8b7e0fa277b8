"""Whether a decision was planned for what the host really trains. `choose()` runs before the
Trainer exists, from what it was told: without the Trainer's arguments it profiles the batch size
of their defaults, and a Trainer that then trains other batches, or in a precision the agent did
not predict, would be predicted from a step time it never runs (a batch of 64 is not 8 batches of
8's step time, nor one of them). The callbacks ask this when training starts and, where it says
why, profile one real batch of the Trainer's and predict every plan again (the core's profiling of
a Job, agent/planning.py), so the start-of-training prediction and the epoch-end rethink both rest
on the step the Trainer runs."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from trainpilot.hosted.plan_rows import row_for
from trainpilot.hosted.record import Decision
from trainpilot.plans import Plan


def why_plan_again(decision: Decision, plan: Plan, batch_size: int | None) -> str | None:
    """Why `decision`'s figures are not for the host's training of `plan` on batches of
    `batch_size` (None: unknown), or None where they are."""
    planned = decision.profile.batch_size
    if batch_size is not None and batch_size > 0 and batch_size != planned:
        return f"the decision was profiled at batch {planned}; this Trainer trains batches of {batch_size}"
    if plan.precision and row_for(decision.report.get("plans", ()), plan) is None:
        # a device the agent could not predict stays unpredicted however often it plans; a precision
        # it was not allowed to weigh is a question of what it was told
        return f"the decision weighed no {plan.precision} plan; this Trainer trains in {plan.precision}"
    return None


def plan_again(
    plan_here: Callable[[], Any], choice: Any, why: str, planning: list[str], note: Callable[[str], None]
) -> Any:
    """The decision planned again for what the host runs (`plan_here`, a Choice); where that fails,
    the decision as it was, with a note saying the prediction is not for the host's step."""
    try:
        again = plan_here()
    except Exception as exc:  # noqa: BLE001 - the old decision still records the run
        note(
            f"{why}; planning again failed ({type(exc).__name__}: {exc}): predicted from the decision's"
            f" batch of {choice.profile.batch_size}"
        )
        return choice
    planning.append(f"{why}: one real batch of {again.profile.batch_size} profiled, every plan predicted again")
    return again
