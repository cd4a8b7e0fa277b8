"""Calibration for a machine that is described, not present: derived from its published figures
(`target_profiles.TargetMachine`: per-core CPU FLOP/s, accelerator peak FLOP/s and memory
bandwidth). Predictions from it are marked "predicted for a described machine".

The fractions below turn published figures into the marginal FLOP rates of the step-time model
(fixed costs per step and per layer are separate terms, as in a measured calibration). They are
typical values, not measurements of the described machine. The CPU fractions are relative to the
profile's `cpu_flops_per_core`, which the shipped profiles give as half of the FMA peak ("sustained");
calibration on the machine this was written on (AMD EPYC, 2 cores) measured marginal rates of the
same order as that figure and fixed costs of fractions of a millisecond per step, per layer and per
recurrent time step (measured: docs/measurements.md#cited-in-the-code-prediction).
"""

from __future__ import annotations

from typing import Any

from trainpilot.backends.cpu import thread_counts
from trainpilot.plans import Plan
from trainpilot.predict.calibration import Calibration, PlanCalibration, StateRates, plan_key
from trainpilot.predict.features import COLUMNS

CPU_EFFICIENCY = {"dense": 0.8, "conv": 1.0, "recurrent": 0.8}
# Recurrent layers run one time step after another: accelerators sustain a small share of peak.
ACCEL_EFFICIENCY = {"dense": 0.45, "conv": 0.35, "recurrent": 0.08}
ANE_EFFICIENCY = 0.30  # forward-only Core ML inference of a conv/dense backbone
# Peak figures quoted for reduced precision overstate fp32 training, which is what TrainPilot runs.
PRECISION_FACTOR = {"fp32": 1.0, "tf32": 0.5, "fp16": 0.5, "bf16": 0.5, "int8": 0.25}
DEFAULT_CPU_BANDWIDTH = 20e9  # bytes/s, a laptop/desktop DDR figure when none is given
CPU_FIXED = {"step": 4e-4, "layer": 3e-4, "seq": 1e-4}
ACCEL_FIXED = {"step": 2.5e-3, "layer": 2.5e-4, "seq": 1e-4}  # kernel launches and a sync per step
ACTIVATION_PASSES = 3.0  # write in forward, read in backward, write the gradient
WEIGHT_PASSES = 8.0  # Adam reads and writes weights, gradients and two moments
EFFICIENCY_CORE_SHARE = 0.35  # an efficiency core's throughput relative to a performance core


def _rates(peak: float, efficiency: dict[str, float], bandwidth: float, fixed: dict[str, float]) -> StateRates:
    coef = {c: 0.0 for c in COLUMNS}
    coef.update(fixed)
    for kind, eff in efficiency.items():
        coef[kind] = 1.0 / max(peak * eff, 1.0)
    coef["activations"] = ACTIVATION_PASSES / bandwidth
    coef["weights"] = WEIGHT_PASSES / bandwidth
    return StateRates(coef=coef, fit_error=0.25, warmup_steps=1.0, points=0)


def _field(obj: Any, name: str, default: Any = None) -> Any:
    return obj.get(name, default) if isinstance(obj, dict) else getattr(obj, name, default)


def target_plans(target: Any) -> list[Plan]:
    """The plans a described machine offers: every CPU thread count, one plan per accelerator."""
    plans = [Plan("cpu", threads=t) for t in thread_counts(int(_field(target, "logical_cpus", 1) or 1))]
    for name in _field(target, "backends", {}) or {}:
        if name == "cuda":
            plans.append(Plan("cuda", device="cuda:0"))
        elif name == "mps":
            plans.append(Plan("mps", device="mps"))
        elif name == "ane":
            # Both ANE modes are listed; only frozen-backbone can be predicted from figures (the
            # device of Core ML's on-device update is Core ML's choice), so the other is excluded.
            plans.append(Plan("ane", mode="frozen-backbone"))
            plans.append(Plan("ane", mode="core-ml-update"))
    return plans


def calibration_for_target(target: Any) -> Calibration:
    name = str(_field(target, "name", "described machine"))
    logical = int(_field(target, "logical_cpus", 1) or 1)
    perf = int(_field(target, "performance_cores", None) or logical)
    per_core = float(_field(target, "cpu_flops_per_core", 0.0) or 0.0)
    backends = _field(target, "backends", {}) or {}
    cpu_backend = backends.get("cpu")
    cpu_bw = float(_field(cpu_backend, "memory_bandwidth_bytes_per_s", 0.0) or 0.0) if cpu_backend else 0.0
    cpu_bw = cpu_bw or DEFAULT_CPU_BANDWIDTH
    notes = [f"derived from the published figures of '{name}', not measured"]
    plans: dict[str, PlanCalibration] = {}
    for plan in target_plans(target):
        if plan.backend == "ane" and plan.mode != "frozen-backbone":
            continue
        if plan.backend == "cpu":
            t = plan.threads or 1
            cores = min(t, perf) + EFFICIENCY_CORE_SHARE * max(min(t, logical) - perf, 0)
            peak = per_core * cores**0.9  # parallel regions never scale perfectly
            plans[plan_key(plan)] = PlanCalibration(plan, _rates(peak, CPU_EFFICIENCY, cpu_bw, CPU_FIXED), None, cpu_bw)
            continue
        spec = backends[plan.backend]
        precision = str(_field(spec, "precision", "fp32") or "fp32").lower()
        factor = PRECISION_FACTOR.get(precision, 1.0)
        if factor != 1.0:
            notes.append(f"{plan.backend}: peak quoted for {precision}, scaled by {factor} for fp32 training")
        peak = float(_field(spec, "peak_flops", 0.0) or 0.0) * factor
        bandwidth = float(_field(spec, "memory_bandwidth_bytes_per_s", 0.0) or 0.0) or cpu_bw
        if plan.backend == "ane":
            rates = _rates(
                peak,
                {"conv": ANE_EFFICIENCY, "dense": ANE_EFFICIENCY},
                bandwidth,
                {"step": 1e-3, "layer": 0.0, "seq": 0.0},
            )
        else:
            rates = _rates(peak, ACCEL_EFFICIENCY, bandwidth, ACCEL_FIXED)
        plans[plan_key(plan)] = PlanCalibration(plan, rates, None, bandwidth)
    return Calibration(
        machine_id=f"described:{name}",
        logical_cpus=logical,
        plans=plans,
        described=name,
        notes=tuple(notes),
    )
