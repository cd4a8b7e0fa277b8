"""Cold prediction: the calibrated step-time model applied to a workload, adjusted for CPU load.

    step_s  = c_step + c_layer*layers + c_seq*recurrent_steps + c_w*weight_bytes
              + batch * (sum_k flops_k * c_k + activation_bytes * c_act)
    epoch_s = the same with per-step terms x steps and per-sample terms x samples
    run_s   = epochs * epoch_s + warmup_steps * step_s   (a fresh model's first step is slower)

The c_* come from calibration: 1/c_k is the sustained FLOP/s of layer kind k, 1/c_act an effective
memory bandwidth for element-wise traffic, the rest fixed costs. Each plan has them idle and next
to one busy core; the observed load picks between (see `load_weights`).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..plans import Plan
from .calibration import Calibration, PlanCalibration, StateRates
from .features import COLUMNS, WorkFeatures

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


def _smooth(x: float, lo: float, hi: float) -> float:
    if x <= lo:
        return 0.0
    if x >= hi:
        return 1.0
    t = (x - lo) / (hi - lo)
    return t * t * (3 - 2 * t)


def load_weights(plan: Plan, busy_cores: float, logical_cpus: int, cal: PlanCalibration,
                 all_threads: PlanCalibration | None) -> tuple[float, float]:
    """(weight of the busy-state rates, extra factor) for a plan under `busy_cores` of other load.

    Calibration measured each CPU plan idle and next to exactly one busy core. More load than that
    (on bigger machines, or every core busy) is extrapolated: a plan that now has more threads than
    free cores, which it did not have next to one busy core, slows like the all-threads plan did when
    it was oversubscribed (a thread without a core stalls every parallel region); a single thread
    without a free core gets the share of a core the scheduler gives it.

    The first LOAD_NOISE_CORES of oversubscription are a reading's noise, not load: next to one
    busy-loop core the load measured during a run reads 0.76-1.08 cores, and a reading of 1.06 used
    to add a third of the 2-thread plan's oversubscribed slow-down at once, so the same run's
    roofline (and the correction learnt against it) jumped with the reading's noise. In five
    replayed decisions-benchmark histories, warm MAPE is 0.1-0.4 points lower without the jump.
    The ramp rises from there to the full slow-down at one whole core of extra load.
    """
    w = _smooth(busy_cores, LOAD_NOISE_CORES, LOAD_FULL_CORES) if cal.busy is not None else 0.0
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
    idle = sum(a * b for a, b in zip(probe, cal.idle.vector()))
    busy = sum(a * b for a, b in zip(probe, cal.busy.vector()))
    return max(busy / idle, 1.0) if idle > 0 else 2.0


def _dot(row: list[float], rates: StateRates) -> float:
    return sum(a * b for a, b in zip(row, rates.vector()))


def _terms(row: list[float], rates: StateRates) -> dict[str, float]:
    v = rates.vector()
    parts = [a * b for a, b in zip(row, v)]
    by = dict(zip(COLUMNS, parts))
    return {
        "overhead": by["step"] + by["layer"] + by["seq"],
        "compute": by["conv"] + by["dense"] + by["recurrent"],
        "memory": by["weights"] + by["activations"],
    }


def estimate(features: WorkFeatures, plan: Plan, busy_cores: float, calibration: Calibration) -> RooflineEstimate | None:
    """Whole-run seconds for `plan`, or None when calibration has nothing for its backend."""
    if plan.is_compiled:
        return _compiled_estimate(features, plan, busy_cores, calibration)
    if plan.workers:  # several workers share each batch (hetero/split_cost.py)
        from ..hetero.split_cost import split_estimate

        return split_estimate(features, plan, busy_cores, calibration)
    cal = calibration.for_plan(plan)
    if cal is None:
        return None
    all_threads = calibration.for_plan(Plan("cpu", threads=calibration.logical_cpus)) if plan.backend == "cpu" else None
    w, extra = load_weights(plan, busy_cores, calibration.logical_cpus, cal, all_threads)
    if plan.backend == "ane":
        return _ane_estimate(features, cal, calibration, busy_cores)
    epoch_row, step_row = features.epoch_row(), features.step_row()

    def blend(fn: Any) -> Any:
        idle = fn(cal.idle)
        if w <= 0 or cal.busy is None:
            return idle
        busy = fn(cal.busy)
        if isinstance(idle, dict):
            return {k: (1 - w) * idle[k] + w * busy[k] for k in idle}
        return (1 - w) * idle + w * busy

    epoch_s = blend(lambda r: _dot(epoch_row, r)) * extra
    step_s = blend(lambda r: _dot(step_row, r)) * extra
    warmup = blend(lambda r: r.warmup_steps)
    run_s = features.epochs * epoch_s + warmup * step_s
    terms = {k: v * extra * features.epochs for k, v in blend(lambda r: _terms(epoch_row, r)).items()}
    terms["warmup"] = warmup * step_s
    fit_error = blend(lambda r: r.fit_error)
    return RooflineEstimate(run_s, epoch_s, step_s, terms, w, extra, float(fit_error))


def _compiled_estimate(features: WorkFeatures, plan: Plan, busy_cores: float, calibration: Calibration) -> RooflineEstimate | None:
    """A torch.compile plan: the eager plan's steps made compiled steps, plus the compile itself
    (compile_cost.py) in place of the eager first-step warm-up. None until compiling was measured."""
    cc = calibration.compile
    eager = estimate(features, plan.as_eager(), busy_cores, calibration) if cc is not None else None
    if cc is None or eager is None:
        return None
    step_s = cc.step_s(features, eager.step_s)
    epoch_s = cc.step_s(features, eager.per_epoch_s / features.steps) * features.steps
    compile_s = cc.compile_s(features)
    terms = {k: v * epoch_s / max(eager.per_epoch_s, 1e-12) for k, v in eager.breakdown.items() if k != "warmup"}
    terms.update(warmup=0.0, compile=compile_s)
    return RooflineEstimate(features.epochs * epoch_s + compile_s, epoch_s, step_s, terms,
                            eager.busy_weight, eager.extra_factor, eager.fit_error)


def _ane_estimate(features: WorkFeatures, cal: PlanCalibration, calibration: Calibration, busy_cores: float) -> RooflineEstimate:
    """The ANE's frozen-backbone mode: the backbone's forward pass runs once over the data on the
    Neural Engine, then only the classifier head trains, on the CPU, for every epoch.
    The ANE entry's `conv`/`dense` coefficients are forward-pass costs per FLOP."""
    rates = cal.idle
    head_flops = min(features.flops_by_kind.get("dense", 0.0), features.total_flops)
    backbone_fwd = max(features.forward_flops - head_flops / 3.0, 0.0)
    kind = "conv" if features.flops_by_kind.get("conv", 0.0) > 0 else "dense"
    features_once = features.samples * backbone_fwd * rates.coef.get(kind, 0.0) + rates.coef.get("step", 0.0) * features.steps
    cpu = calibration.for_plan(Plan("cpu", threads=calibration.logical_cpus))
    head_rates = cpu.idle if cpu is not None else rates
    head_epoch = features.steps * (head_rates.coef.get("step", 0.0) + head_rates.coef.get("layer", 0.0)) + features.samples * head_flops * head_rates.coef.get("dense", 0.0)
    run_s = features_once + features.epochs * head_epoch
    return RooflineEstimate(
        run_s,
        run_s / features.epochs,
        run_s / max(features.steps * features.epochs, 1),
        {"overhead": features.steps * features.epochs * head_rates.coef.get("step", 0.0), "compute": run_s, "memory": 0.0, "warmup": 0.0},
        0.0,
        1.0,
        rates.fit_error,
    )
