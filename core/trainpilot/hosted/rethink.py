"""The closed loop's question asked of a host loop's training at an epoch's end: with the pace
measured so far, would another plan the host can run finish the remaining batches sooner by the
margin that moves a TrainPilot run (run/replan.py)? Every other plan's prediction is scaled by this
run's bias (measured pace over predicted), as the closed loop scales them.

Only the answer is given: the host owns its loop, so nothing moves. Compiled plans are left out, as
the closed loop leaves them out (their compile time is not a switch), and a move is costed at zero
(the host would start again, which is the user's call, not a switch TrainPilot makes).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from trainpilot.hosted.record import Decision, HostedRun
from trainpilot.plans import Plan

MIN_STEPS = 2  # a pace needs more than one batch: the first warms the caches up


def rethink_hosted(run: HostedRun, decision: Decision, runnable: Callable[[Plan], bool]) -> Any:
    """run/replan.py's Rethink for the run's remaining batches (None: nothing to weigh yet, or no
    batches remain)."""
    from trainpilot.run.replan import Option, clamp_bias, rethink

    clock, ex = run.clock, run.expectation
    if clock.steps < MIN_STEPS or clock.seconds <= 0 or not math.isfinite(ex.planned_steps):
        return None
    remaining = int(ex.planned_steps) - clock.steps
    if remaining <= 0:
        return None
    measured = clock.seconds / clock.steps
    bias = clamp_bias(measured, ex.per_step_s)
    base_steps = max(decision.epochs, 1) * decision.profile.steps_per_epoch
    options = []
    for row in decision.report.get("plans", ()):
        if row.get("predicted_s") is None or row.get("excluded"):
            continue
        plan = Plan.from_dict(row)
        if plan.is_compiled or not runnable(plan):
            continue
        options.append(Option(plan, float(row["predicted_s"]) / base_steps * bias, 0.0))
    return rethink(ex.plan, measured, remaining, options)
