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

from typing import Any

from trainpilot.plans import Plan
from trainpilot.predict.calibration import Calibration, PlanCalibration, StateRates
from trainpilot.predict.features import COLUMNS, WorkFeatures
from trainpilot.predict.roofline_terms import RooflineEstimate, load_weights, log2_between
from trainpilot.predict.split_cost import split_estimate


def _dot(row: list[float], rates: StateRates) -> float:
    return sum(a * b for a, b in zip(row, rates.vector(), strict=False))


def _terms(row: list[float], rates: StateRates) -> dict[str, float]:
    v = rates.vector()
    parts = [a * b for a, b in zip(row, v, strict=False)]
    by = dict(zip(COLUMNS, parts, strict=False))
    return {
        "overhead": by["step"] + by["layer"] + by["seq"],
        "compute": by["conv"] + by["dense"] + by["recurrent"],
        "memory": by["weights"] + by["activations"],
    }


def estimate(
    features: WorkFeatures, plan: Plan, busy_cores: float, calibration: Calibration
) -> RooflineEstimate | None:
    """Whole-run seconds for `plan`, or None when calibration has nothing for its backend. A job
    that loads its batches (a Dataset) pays for it as data_pipeline.py says."""
    compute = _compute_estimate(features, plan.computing(), busy_cores, calibration)
    if compute is None or (features.load_s_per_batch <= 0 and not plan.loader_workers):
        return compute
    return with_loading(features, plan, busy_cores, calibration, compute)


def with_loading(
    features: WorkFeatures, plan: Plan, busy_cores: float, calibration: Calibration, compute: RooflineEstimate
) -> RooflineEstimate:
    from dataclasses import replace

    from trainpilot.predict.data_pipeline import pipeline

    def compute_step(busy: float) -> float:
        found = _compute_estimate(features, plan.computing(), busy, calibration) if busy != busy_cores else compute
        return (found or compute).per_epoch_s / features.steps

    flow = pipeline(
        compute_step, features.load_s_per_batch, plan, busy_cores, calibration.logical_cpus, features.spawned_workers
    )
    epoch_s = features.steps * flow.step_s + flow.per_epoch_extra_s
    run_s = compute.run_s - features.epochs * compute.per_epoch_s + features.epochs * epoch_s + flow.start_s
    breakdown = dict(compute.breakdown)
    breakdown["loading"] = features.epochs * (epoch_s - compute.per_epoch_s) + flow.start_s
    return replace(
        compute,
        run_s=run_s,
        per_epoch_s=epoch_s,
        step_s=flow.step_s,
        breakdown=breakdown,
        note="; ".join(n for n in (compute.note, flow.describe(plan)) if n),
    )


def _compute_estimate(
    features: WorkFeatures, plan: Plan, busy_cores: float, calibration: Calibration, probing: bool = False
) -> RooflineEstimate | None:
    if plan.is_compiled:
        return _compiled_estimate(features, plan, busy_cores, calibration)
    if plan.memory_format or plan.precision:
        return _settings_estimate(features, plan, busy_cores, calibration, probing)
    if plan.workers:  # several workers share each batch (predict/split_cost.py)
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
    found = RooflineEstimate(run_s, epoch_s, step_s, terms, w, extra, float(fit_error))
    if plan.backend == "cpu" and features.probe_step_s > 0 and not probing:
        return _scaled(found, probe_ratio(features, calibration, plan.threads or calibration.logical_cpus))
    return found


PROBE_RATIO_BOUNDS = (0.25, 4.0)  # a probe further off than this measured something else (a page fault storm)


def probe_ratio(features: WorkFeatures, calibration: Calibration, threads: int = 1) -> float:
    """How much slower (>1) or faster the job's own steps ran than the roofline says, measured
    before planning (job/step_probe.py): the roofline is fit to the zoo's layers, and a job's ops
    (attention's small batched matmuls, depthwise convolutions) may run at other rates. Measured on
    one thread (a probe on one core is barely touched by another busy one) and, when the machine
    was quiet, on every core too: between them the ratio follows log2 of the thread count."""
    low, high = PROBE_RATIO_BOUNDS

    def ratio(measured: float, at: int) -> float | None:
        roof = _compute_estimate(features, Plan("cpu", threads=at), 0.0, calibration, probing=True)
        return min(max(measured / roof.step_s, low), high) if roof is not None and roof.step_s > 0 else None

    one = ratio(features.probe_step_s, 1)
    if one is None:
        return 1.0
    top = features.probe_threads
    if threads <= 1 or top <= 1 or features.probe_all_s <= 0:
        return one
    every = ratio(features.probe_all_s, top)
    if every is None:
        return one
    return log2_between({1: one, top: every}, threads)


def _scaled(found: RooflineEstimate, ratio: float) -> RooflineEstimate:
    from dataclasses import replace

    if ratio == 1.0:
        return found
    breakdown = {k: v * ratio for k, v in found.breakdown.items()}
    return replace(
        found,
        run_s=found.run_s * ratio,
        per_epoch_s=found.per_epoch_s * ratio,
        step_s=found.step_s * ratio,
        breakdown=breakdown,
        note=f"the job's own steps run {ratio:.2f}x the roofline's pace here (probed)",
    )


def _settings_estimate(
    features: WorkFeatures, plan: Plan, busy_cores: float, calibration: Calibration, probing: bool
) -> RooflineEstimate | None:
    """A plan in another layout or precision: the same plan in fp32 NCHW, its compute scaled by
    what the setting does to this job (predict/settings_cost.py). None when neither the job's
    probe nor calibration has measured the setting on this backend."""
    from trainpilot.predict.settings_cost import settings_ratio

    base = _compute_estimate(features, plan.default_settings(), busy_cores, calibration, probing)
    if base is None:
        return None
    found = settings_ratio(features, plan, calibration)
    if found is None:
        return None
    ratio, why = found
    scaled = _scaled(base, ratio)
    from dataclasses import replace

    return replace(scaled, note="; ".join(n for n in (base.note, why) if n))


def _compiled_estimate(
    features: WorkFeatures, plan: Plan, busy_cores: float, calibration: Calibration
) -> RooflineEstimate | None:
    """A torch.compile plan: the eager plan's steps made compiled steps, plus the compile itself
    (compile_cost.py) in place of the eager first-step warm-up. None until compiling was measured."""
    cc = calibration.compile
    eager = _compute_estimate(features, plan.as_eager(), busy_cores, calibration) if cc is not None else None
    if cc is None or eager is None:
        return None
    step_s = cc.step_s(features, eager.step_s)
    epoch_s = cc.step_s(features, eager.per_epoch_s / features.steps) * features.steps
    compile_s = cc.compile_s(features)
    terms = {k: v * epoch_s / max(eager.per_epoch_s, 1e-12) for k, v in eager.breakdown.items() if k != "warmup"}
    terms.update(warmup=0.0, compile=compile_s)
    return RooflineEstimate(
        features.epochs * epoch_s + compile_s,
        epoch_s,
        step_s,
        terms,
        eager.busy_weight,
        eager.extra_factor,
        eager.fit_error,
    )


def _ane_estimate(
    features: WorkFeatures, cal: PlanCalibration, calibration: Calibration, busy_cores: float
) -> RooflineEstimate:
    """The ANE's frozen-backbone mode: the backbone's forward pass runs once over the data on the
    Neural Engine, then only the classifier head trains, on the CPU, for every epoch.
    The ANE entry's `conv`/`dense` coefficients are forward-pass costs per FLOP."""
    rates = cal.idle
    head_flops = min(features.flops_by_kind.get("dense", 0.0), features.total_flops)
    backbone_fwd = max(features.forward_flops - head_flops / 3.0, 0.0)
    kind = "conv" if features.flops_by_kind.get("conv", 0.0) > 0 else "dense"
    features_once = (
        features.samples * backbone_fwd * rates.coef.get(kind, 0.0) + rates.coef.get("step", 0.0) * features.steps
    )
    cpu = calibration.for_plan(Plan("cpu", threads=calibration.logical_cpus))
    head_rates = cpu.idle if cpu is not None else rates
    head_epoch = features.steps * (
        head_rates.coef.get("step", 0.0) + head_rates.coef.get("layer", 0.0)
    ) + features.samples * head_flops * head_rates.coef.get("dense", 0.0)
    run_s = features_once + features.epochs * head_epoch
    return RooflineEstimate(
        run_s,
        run_s / features.epochs,
        run_s / max(features.steps * features.epochs, 1),
        {
            "overhead": features.steps * features.epochs * head_rates.coef.get("step", 0.0),
            "compute": run_s,
            "memory": 0.0,
            "warmup": 0.0,
        },
        0.0,
        1.0,
        rates.fit_error,
    )
