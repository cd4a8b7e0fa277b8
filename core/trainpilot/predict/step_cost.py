"""One plan's training step as the cost model sees it, split into the parts a shared batch needs:

    step(n) = fixed_s + optimizer_s + n * per_sample_s

`fixed_s` is what a step costs whatever its batch (Python, dispatch of every layer, recurrent time
steps), `optimizer_s` Adam's pass over the weights, `per_sample_s` compute and activation traffic.
The figures are the calibrated roofline's (`predict/roofline.py`), blended for the load the worker
will see exactly as a single-device prediction is, so a split and the single plans it competes
with are predicted by the same measurements. `finish_time_shares` takes (per_sample_s, fixed).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from trainpilot.plans import Plan
from trainpilot.predict.roofline_terms import load_weights


@dataclass(frozen=True)
class StepCost:
    plan: Plan
    fixed_s: float
    optimizer_s: float
    per_sample_s: float
    warmup_steps: float  # a fresh model's first step costs this many steady steps extra
    fit_error: float
    busy_cores: float  # the load this was predicted under

    def step_s(self, samples: int) -> float:
        return self.fixed_s + self.optimizer_s + samples * self.per_sample_s

    def scaled(self, factor: float) -> StepCost:
        """The same step `factor` times slower (a measured slow-down, a history correction)."""
        return StepCost(
            self.plan,
            self.fixed_s * factor,
            self.optimizer_s * factor,
            self.per_sample_s * factor,
            self.warmup_steps,
            self.fit_error,
            self.busy_cores,
        )


def step_cost(features: Any, plan: Plan, busy_cores: float, calibration: Any) -> StepCost | None:
    """The calibrated step of `plan` under `busy_cores` of other load; None when calibration has
    nothing for it (an unmeasured backend, a compiled or split plan, the ANE's two-phase mode)."""
    if plan.workers or plan.is_compiled or plan.backend == "ane":
        return None
    cal = calibration.for_plan(plan)
    if cal is None:
        return None
    all_threads = calibration.for_plan(Plan("cpu", threads=calibration.logical_cpus)) if plan.backend == "cpu" else None
    weight, extra = load_weights(plan, busy_cores, calibration.logical_cpus, cal, all_threads)
    states = [(1.0 - weight, cal.idle)] + ([(weight, cal.busy)] if weight > 0 and cal.busy is not None else [])

    def blended(fn: Any) -> float:
        return sum(w * fn(rates) for w, rates in states) / sum(w for w, _ in states) * extra

    row0 = features.step_row(batch=0)  # [step, layer, seq, weights, 0...]
    row1 = features.step_row(batch=1)

    def per_sample(rates: Any) -> float:
        v = rates.vector()
        return sum(a * b for a, b in zip(row1[4:], v[4:], strict=False))

    return StepCost(
        plan=plan,
        fixed_s=blended(lambda r: sum(a * b for a, b in zip(row0[:3], r.vector()[:3], strict=False))),
        optimizer_s=blended(lambda r: row0[3] * r.vector()[3]),
        per_sample_s=max(blended(per_sample), 1e-12),  # a zero cost would make a worker infinitely fast
        warmup_steps=sum(w * r.warmup_steps for w, r in states) / sum(w for w, _ in states),
        fit_error=max(r.fit_error for _w, r in states),
        busy_cores=busy_cores,
    )


def epoch_steps(features: Any) -> tuple[int, int]:
    """(full steps, samples in the last step) of one epoch: the last batch may be smaller."""
    full, last = divmod(features.samples, features.batch_size)
    return (full, last) if last else (full - 1, features.batch_size)
