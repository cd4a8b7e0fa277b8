"""What every roofline estimate is made of: its result (`RooflineEstimate`) and how the observed
load blends a plan's two calibrated states, idle and next to one busy core (`load_weights`).

A module of its own because both the single-device roofline (roofline.py) and the split step
(step_cost.py, split_cost.py) build on it, and the roofline dispatches split plans to the latter.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from trainpilot.plans import Plan
from trainpilot.predict.calibration import PlanCalibration

# Busy cores below this are background noise (a terminal, a sampler), above the upper edge the
# "one core busy" measurement applies in full; in between the two states are blended.
LOAD_NOISE_CORES = 0.15
LOAD_FULL_CORES = 0.75


@dataclass(frozen=True)
class RooflineEstimate:
    run_s: float
    per_epoch_s: float
    step_s: float
    breakdown: dict[str, float]  # seconds per run by term: overhead, compute, memory
    busy_weight: float  # 0 = idle rates, 1 = "one core busy" rates
    extra_factor: float  # further slow-down for more busy cores than calibration measured
    fit_error: float
    note: str = ""  # how the data pipeline shares the step, when the job loads its batches


def smooth_step(x: float, lo: float, hi: float) -> float:
    if x <= lo:
        return 0.0
    if x >= hi:
        return 1.0
    t = (x - lo) / (hi - lo)
    return t * t * (3 - 2 * t)


def log2_between(points: dict[int, float], threads: int) -> float:
    """A value measured at a few thread counts, at `threads`: between two measured counts it
    follows log2 of the count (doubling the threads adds about as much each time), outside them
    it is the nearest measured one's."""
    ordered = sorted(points.items())
    if threads <= ordered[0][0]:
        return ordered[0][1]
    for (t0, v0), (t1, v1) in zip(ordered, ordered[1:], strict=False):
        if threads <= t1:
            return v0 + (v1 - v0) * (math.log2(threads) - math.log2(t0)) / (math.log2(t1) - math.log2(t0))
    return ordered[-1][1]


def load_weights(
    plan: Plan, busy_cores: float, logical_cpus: int, cal: PlanCalibration, all_threads: PlanCalibration | None
) -> tuple[float, float]:
    """(weight of the busy-state rates, extra factor) for a plan under `busy_cores` of other load.

    Calibration measured each CPU plan idle and next to exactly one busy core. More load than that
    (on bigger machines, or every core busy) is extrapolated: a plan that now has more threads than
    free cores, which it did not have next to one busy core, slows like the all-threads plan did when
    it was oversubscribed (a thread without a core stalls every parallel region); a single thread
    without a free core gets the share of a core the scheduler gives it.

    The first LOAD_NOISE_CORES of oversubscription are a reading's noise, not load: next to one
    busy-loop core the load measured during a run reads a little under or over one core, and a
    reading just over it used to add part of the 2-thread plan's oversubscribed slow-down at once,
    so the same run's roofline (and the correction learnt against it) jumped with the reading's
    noise. In replayed decisions-benchmark histories, warm MAPE is lower without the jump
    (measured: docs/measurements.md#cited-in-the-code-prediction).
    The ramp rises from there to the full slow-down at one whole core of extra load.
    """
    w = smooth_step(busy_cores, LOAD_NOISE_CORES, LOAD_FULL_CORES) if cal.busy is not None else 0.0
    threads = (plan.threads or logical_cpus) if plan.backend == "cpu" else 1  # an accelerator's host thread
    free_now = max(logical_cpus - busy_cores, 0.0)
    over_now = max(threads - free_now, 0.0)
    over_measured = max(threads - (logical_cpus - 1), 0) if cal.busy is not None else 0
    extra_over = max(over_now - over_measured - LOAD_NOISE_CORES, 0.0) / (1.0 - LOAD_NOISE_CORES)
    if extra_over <= 0.0:
        return w, 1.0
    if threads == 1 or all_threads is None or all_threads.busy is None:
        return w, 1.0 + min(extra_over, 1.0)
    ratio = _ratio(all_threads)
    return w, 1.0 + (ratio - 1.0) * min(extra_over, 1.0)


def _ratio(cal: PlanCalibration) -> float:
    """Busy/idle slow-down of a plan on a typical mid-sized step (features of a ~2 MFLOP/sample net)."""
    if cal.busy is None:
        return 2.0
    probe = [1.0, 4.0, 0.0, 4e6, 0.0, 64 * 2e6, 0.0, 64 * 2e4]
    idle = sum(a * b for a, b in zip(probe, cal.idle.vector(), strict=False))
    busy = sum(a * b for a, b in zip(probe, cal.busy.vector(), strict=False))
    return max(busy / idle, 1.0) if idle > 0 else 2.0
