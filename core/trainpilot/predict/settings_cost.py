"""What a layout or precision does to a job's step: the ratio of its step time to fp32 NCHW's.

Two sources, the job's own first:
- the step probe (job/step_probe.probe_settings): the job's real step in each variant, alternated
  with the default's, on one thread and on every core. A convolution's speed in channels_last
  depends on its shapes and the thread count (a model may gain at one thread and lose at two), so
  the job's own measurement beats any machine-wide rate. Between the measured thread counts the
  ratio follows log2 of the threads, as the eager probe's does. CPU plans only: the probe runs
  on the host.
- calibration (predict/settings_calibration.py): per backend and thread count, what each setting
  does to the micro-benchmarks' conv and dense FLOPs; applied to this job's FLOPs by kind.
"""

from __future__ import annotations

from trainpilot.plans import Plan
from trainpilot.predict.calibration import Calibration, plan_key
from trainpilot.predict.features import WorkFeatures
from trainpilot.predict.roofline_terms import log2_between

RATIO_BOUNDS = (0.1, 10.0)  # a variant further off than this measured a hiccup, not the setting


def _threads(plan: Plan, logical_cpus: int) -> int | None:
    """The host threads a plan computes on, or None when it is not a CPU plan (a split of CPU
    workers counts one worker's threads: each runs its own share)."""
    if plan.backend == "cpu":
        return plan.threads or logical_cpus
    if plan.workers and all(w.backend == "cpu" for w in plan.workers):
        return max(w.threads or 1 for w in plan.workers)
    return None


def probed_ratio(features: WorkFeatures, key: str, threads: int) -> float | None:
    measured = features.settings_ratios.get(key)
    return log2_between(measured, threads) if measured else None


def calibrated_ratio(features: WorkFeatures, plan: Plan, calibration: Calibration) -> float | None:
    """The step ratio calibration's per-kind FLOP ratios give this job on this plan's backend."""
    cal = calibration.for_plan(plan.default_settings())  # a compiled plan's is its eager one's
    if cal is None:
        return None
    key = plan_key(cal.plan)
    kinds = calibration.settings.get(key, {}).get(plan.settings_key)
    if not kinds:
        return None
    row = features.epoch_row()
    total = sum(a * b for a, b in zip(row, cal.idle.vector(), strict=False))
    if total <= 0:
        return None
    change = 0.0
    for kind, ratio in kinds.items():
        flops = features.samples * features.flops_by_kind.get(kind, 0.0)
        change += flops * cal.idle.coef.get(kind, 0.0) * (ratio - 1.0)
    return 1.0 + change / total


def settings_ratio(features: WorkFeatures, plan: Plan, calibration: Calibration) -> tuple[float, str] | None:
    """(variant step / default step, why) for `plan`, or None when nothing has measured it."""
    key = plan.settings_key
    threads = _threads(plan, calibration.logical_cpus)
    if threads is not None:
        probed = probed_ratio(features, key, threads)
        if probed is not None:
            ratio = min(max(probed, RATIO_BOUNDS[0]), RATIO_BOUNDS[1])
            return ratio, f"{key} probed at {1 / ratio:.2f}x fp32 NCHW's speed"
    calibrated = calibrated_ratio(features, plan, calibration)
    if calibrated is not None:
        ratio = min(max(calibrated, RATIO_BOUNDS[0]), RATIO_BOUNDS[1])
        return ratio, f"{key} calibrated at {1 / ratio:.2f}x fp32 NCHW's speed for these layers"
    return None
