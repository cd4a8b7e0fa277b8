"""The first estimate: training time from counted FLOPs over a measured CPU throughput, and the
seed's deterministic rule cascade as the cold-start policy.

This is what the agent uses before the cost model (`predict`) has calibrated the machine. It is
deliberately simple and documented:

    step_s   = flops_per_sample * batch / throughput(threads) + STEP_OVERHEAD_S
    epoch_s  = steps_per_epoch * step_s * load_penalty(threads, free cores)
    run_s    = epochs * epoch_s

`throughput(threads)` is measured once per process on a dense forward+backward (a fraction of a
second: docs/measurements.md#cited-in-the-code-prediction).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from trainpilot.plans import Decision, Plan, PlanPrediction
from trainpilot.units import seconds as fmt_s

if TYPE_CHECKING:
    from trainpilot.job.workload import WorkloadProfile
    from trainpilot.machine.monitor import UtilizationSample

# "Low" CPU utilisation for the cascade's conv -> ANE rule: below half of the machine busy, the
# host has room to feed the Neural Engine and run the PyTorch side of the job.
LOW_CPU_UTILIZATION = 0.5
STEP_OVERHEAD_S = 0.0015  # optimizer step, Python and data-loader overhead per mini-batch (measured order)
# A thread that has no free core waits at every parallel region; 2 threads next to a busy core on 2
# cores measured about this much slower than 1 (docs/prediction.md#plans-and-calibration).
OVERSUBSCRIBED_PENALTY = 2.0

_throughput_cache: dict[int, float] = {}
_cache_lock = threading.Lock()


def measured_cpu_flops(threads: int) -> float:
    """Sustained FLOP/s of a dense forward+backward at `threads` threads, measured once per process."""
    with _cache_lock:
        if threads in _throughput_cache:
            return _throughput_cache[threads]
        import torch

        previous = torch.get_num_threads()
        torch.set_num_threads(threads)
        try:
            x = torch.randn(128, 512)
            layer = torch.nn.Linear(512, 512)
            flops_per_iter = 3 * 2 * 128 * 512 * 512  # forward + 2x backward
            for _ in range(3):  # warm up allocator and kernels
                layer(x).sum().backward()
            iters, start = 0, time.perf_counter()
            while time.perf_counter() - start < 0.08:
                layer(x).sum().backward()
                iters += 1
            rate = iters * flops_per_iter / (time.perf_counter() - start)
        finally:
            torch.set_num_threads(previous)
        _throughput_cache[threads] = rate
        return rate


def free_cores(load: UtilizationSample, logical_cpus: int) -> float:
    return max(logical_cpus - load.busy_cores, 0.0)


def load_penalty(threads: int, load: UtilizationSample, logical_cpus: int) -> float:
    """Slow-down of a `threads`-thread plan when other work holds some cores: none while every
    thread has a free core, rising linearly to OVERSUBSCRIBED_PENALTY once a whole core is missing."""
    deficit = threads - max(free_cores(load, logical_cpus), 1.0)
    if deficit <= 0:
        return 1.0
    return 1.0 + min(deficit, 1.0) * (OVERSUBSCRIBED_PENALTY - 1.0)


class FirstEstimate:
    """A `Predictor` that needs no calibration. Accelerator plans get no time estimate here (the
    rule cascade decides them); the cost model replaces this once the machine is calibrated."""

    def __init__(self, logical_cpus: int | None = None, throughput: Callable[[int], float] | None = None):
        from trainpilot.machine.probe import usable_cpus

        self.logical_cpus = logical_cpus or usable_cpus()
        self.throughput = throughput or measured_cpu_flops  # FLOP/s at a thread count

    def predict(self, profile: WorkloadProfile, plan: Plan, load: UtilizationSample) -> PlanPrediction:
        if plan.workers:  # what a split costs (its workers' shares, the interpreter lock) needs calibration
            return PlanPrediction(
                plan,
                None,
                excluded_reason="a split is predicted only from this machine's calibration"
                " (`trainpilot headless calibrate`)",
                source="estimate",
            )
        if plan.backend != "cpu":
            return PlanPrediction(
                plan, None, source="estimate", detail={"note": "no measured throughput for this device yet"}
            )
        if plan.is_compiled:  # compiling's cost is only known to the calibrated cost model
            return PlanPrediction(
                plan,
                None,
                excluded_reason="torch.compile plans need the calibrated cost model"
                " (`trainpilot headless calibrate --compile`)",
                source="estimate",
            )
        threads = plan.threads or self.logical_cpus
        flops = self.throughput(threads)
        step_s = profile.flops_per_sample * profile.batch_size / flops + STEP_OVERHEAD_S
        penalty = load_penalty(threads, load, self.logical_cpus)
        epoch_s = profile.steps_per_epoch * step_s * penalty
        loading = ""
        load_s = float(getattr(profile, "load_s_per_batch", 0.0) or 0.0)
        if load_s > 0 or plan.loader_workers:
            from trainpilot.predict.data_pipeline import pipeline

            spawn = getattr(profile, "loader_start", "fork") == "spawn"
            flow = pipeline(lambda _busy: step_s * penalty, load_s, plan, 0.0, self.logical_cpus, spawn)
            epoch_s = profile.steps_per_epoch * flow.step_s + flow.per_epoch_extra_s
            loading = flow.describe(plan)
        return PlanPrediction(
            plan,
            epoch_s * profile.epochs,
            source="estimate",
            detail={
                "per_epoch_s": epoch_s,
                "flops_per_s": flops,
                "load_penalty": penalty,
                "relative_error": 0.5,
                "interval": first_estimate_interval(epoch_s * profile.epochs),
                **({"loading": loading} if loading else {}),
            },
        )

    def decide(
        self,
        profile: WorkloadProfile,
        predictions: list[PlanPrediction],
        load: UtilizationSample,
        hardware: dict[str, Any],
    ) -> Decision:
        return rule_cascade_decision(profile, predictions, load, hardware)

    def record(self, *args: Any, **kwargs: Any) -> None:
        """The first estimate does not learn; the cost model does."""


def first_estimate_interval(predicted_s: float) -> dict[str, Any]:
    """Nothing measured yet: the 80 % interval of a log-normal error of 50 % (the relative error
    this estimate claims), not a measured one."""
    from trainpilot.predict.interval import around

    z = 1.2816 * 0.5
    return around(predicted_s, (-z, z, 0.0), "estimate").to_dict()


def cascade_backend(profile: Any, hardware: dict[str, Any]) -> tuple[str, float, str]:
    """The seed's deterministic cascade, extended for CUDA/MPS. Returns (backend, confidence, why).

    1. ANE unavailable and no other accelerator -> cpu (1.0: nothing else can run it)
    2. RNN model                                  -> cpu (0.95: recurrent steps are sequential)
    3. conv and CPU utilisation < 0.5             -> ane (0.85)
    4. otherwise                                  -> cpu (0.8)
    CUDA/MPS (not in the seed): a free GPU wins over the CPU for conv and dense models (0.7).
    """
    get = profile.get if isinstance(profile, dict) else lambda k, d=None: getattr(profile, k, d)
    has_rnn, has_conv = bool(get("has_rnn", False)), bool(get("has_conv", False))
    cpu_util = float(hardware.get("cpu_utilization", 0.0))
    available = set(hardware.get("available_backends", ["cpu"]))
    if hardware.get("ane_available"):
        available.add("ane")
    else:
        available.discard("ane")
    gpu = next((b for b in ("cuda", "mps") if b in available), None)
    if has_rnn:
        return "cpu", 0.95, "recurrent model: its time steps run one after another, so the CPU is the safe choice"
    if gpu and not ("ane" in available and has_conv and cpu_util < LOW_CPU_UTILIZATION):
        return gpu, 0.7, f"{gpu} is available and the model is not recurrent"
    if "ane" not in available:
        return "cpu", 1.0, "the Neural Engine is not available here, so the CPU runs it"
    if has_conv and cpu_util < LOW_CPU_UTILIZATION:
        return "ane", 0.85, f"convolutional model and CPU utilisation {cpu_util:.0%} < {LOW_CPU_UTILIZATION:.0%}"
    return "cpu", 0.8, f"CPU utilisation {cpu_util:.0%} or model kind favours the CPU"


def rule_cascade_decision(
    profile: WorkloadProfile,
    predictions: list[PlanPrediction],
    load: UtilizationSample,
    hardware: dict[str, Any],
) -> Decision:
    """Backend from the cascade; within it, the plan (thread count) with the lowest estimate."""
    backend, confidence, why = cascade_backend(profile, hardware)
    candidates = [p for p in predictions if p.plan.backend == backend and not p.excluded]
    if not candidates:  # the cascade's backend offers no runnable plan: take the CPU
        candidates = [p for p in predictions if p.plan.backend == "cpu" and not p.excluded]
        why += f"; {backend} has no runnable plan, so the CPU runs it"
        backend, confidence = "cpu", min(confidence, 0.6)
    timed = [p for p in candidates if p.predicted_s is not None]
    best = min(timed, key=lambda p: p.predicted_s) if timed else candidates[0]  # type: ignore[arg-type, return-value]
    reasoning = [f"rule cascade: {why} -> {backend} (confidence {confidence:.2f})"]
    if len(timed) > 1:
        ordered = sorted(timed, key=lambda p: p.predicted_s)  # type: ignore[arg-type, return-value]
        runner = ordered[1]
        reasoning.append(
            f"fastest {backend} plan by estimate: {best.plan.label} {fmt_s(best.predicted_s)}"
            f" vs {runner.plan.label} {fmt_s(runner.predicted_s)}"
        )
    margin = None
    if len(timed) > 1 and best.predicted_s:
        second = sorted(p.predicted_s for p in timed if p.predicted_s is not None)[1]  # timed: predicted plans only
        margin = second / best.predicted_s - 1
    return Decision(best.plan, best.predicted_s, confidence, tuple(reasoning), margin, policy="rules")
