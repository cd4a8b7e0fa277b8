"""Calibration: run the micro-benchmarks for every plan this machine offers, idle and next to a
real busy core, fit the step-time model per plan and state, and store the result.

A full run measures 4 plan states x 18 networks; how long it and quick mode take on 2 cores is on
docs/prediction.md. The CPU is shared with whatever else runs on the machine, so a full run waits
(within a budget) for other processes to settle and measures a point again when they took a core
during it; what remains is written into the notes.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from contextlib import nullcontext

from trainpilot.machine.contention import BusyLoad, ExternalCpuMeter, wait_for_quiet
from trainpilot.plans import Plan
from trainpilot.predict.calibration import Calibration, PlanCalibration, StateRates, plan_key
from trainpilot.predict.features import COLUMNS, WorkFeatures
from trainpilot.predict.fit import relative_nnls
from trainpilot.predict.microbench import (
    FULL_SUITE,
    QUICK_SUITE,
    BenchSpec,
    bench_features,
    memory_bandwidth,
    time_training_steps,
)

Progress = Callable[[float, str], None]

# Other processes may use this much CPU beyond the load we start ourselves before a point is retried.
NOISE_TOLERANCE_CORES = 0.3


def _device_sync(backend: str) -> Callable[[], None] | None:
    """The one hardware-specific call: wait for queued device work, so timings are honest."""
    if backend == "cuda":
        import torch

        return torch.cuda.synchronize
    if backend == "mps":
        import torch

        return torch.mps.synchronize
    return None


def _states(plans: list[Plan], logical_cpus: int) -> list[tuple[Plan, int]]:
    """(plan, busy cores) pairs to measure. Every plan idle; CPU plans with 1 thread and with all
    threads also next to one busy core (the two ends of the thread range, where load matters)."""
    states = [(p, 0) for p in plans]
    if logical_cpus >= 2:
        cpu = [p for p in plans if p.backend == "cpu" and p.threads in (1, logical_cpus)]
        states += [(p, 1) for p in cpu]
    return states


class _WaitBudget:
    """Total seconds calibration may spend waiting for other processes to go quiet."""

    def __init__(self, seconds: float):
        self.left = seconds

    def wait(self, busy: int) -> None:
        if self.left <= 0:
            return
        self.left -= wait_for_quiet(expected_cores=busy, tolerance=0.15, timeout_s=min(self.left, 5.0), window_s=0.1)


def _measure_point(
    spec: BenchSpec, plan: Plan, busy: int, min_seconds: float, attempts: int, budget: _WaitBudget
) -> tuple[float, float, float]:
    """(steady step s, first-step extra s, external cores) of the least disturbed attempt."""
    best: tuple[float, float, float] | None = None
    for _ in range(attempts):
        budget.wait(busy)
        with ExternalCpuMeter() as meter:
            steady, first = time_training_steps(
                spec,
                plan.threads if plan.backend == "cpu" else None,
                min_seconds,
                device=(plan.device or plan.backend) if plan.backend in ("cuda", "mps") else "cpu",
                sync=_device_sync(plan.backend),
            )
        extra = max(meter.result.cores - busy, 0.0)
        if best is None or extra < best[2]:
            best = (steady, first, extra)
        if extra <= NOISE_TOLERANCE_CORES:
            break
    assert best is not None
    return best


def fit_state(
    features: list[WorkFeatures],
    steady: list[float],
    first: list[float],
    batch: list[int],
    external: list[float],
    names: list[str] | None = None,
    base: StateRates | None = None,
    kinds: list[str] | None = None,
) -> StateRates:
    """Fit one plan in one CPU state. With `base` (the same plan idle), the fit is of what the
    busy core *adds* to the idle coefficients (each addition >= 0: contention never speeds a step
    up), which leaves far fewer ways for heavy-tailed contended timings to mislead it."""
    import numpy as np

    rows = np.array([f.step_row(b) for f, b in zip(features, batch, strict=False)])
    base_vec = np.array(base.vector()) if base is not None else np.zeros(len(COLUMNS))
    delta, err = relative_nnls(rows, np.array(steady), base=rows @ base_vec if base is not None else None)
    coef = base_vec + delta
    warmup = statistics.median(f / s for f, s in zip(first, steady, strict=False) if s > 0) if steady else 1.0
    sustained: dict[str, float] = {}
    for kind, f, b, s in zip(kinds or [], features, batch, steady, strict=False):
        if kind in ("conv", "dense", "recurrent") and s > 0:
            sustained[kind] = max(sustained.get(kind, 0.0), f.total_flops * b / s)
    return StateRates(
        coef=dict(zip(COLUMNS, (float(c) for c in coef), strict=False)),
        fit_error=err,
        warmup_steps=float(warmup),
        points=len(steady),
        external_load=float(statistics.fmean(external)) if external else 0.0,
        samples=tuple(zip(names or [""] * len(steady), steady, first, external, strict=False)),
        sustained_flops=sustained,
    )


def run_calibration(
    machine_id: str,
    logical_cpus: int,
    plans: list[Plan],
    *,
    progress: Progress | None = None,
    quick: bool = False,
    wait_budget_s: float | None = None,
) -> Calibration:
    """Measure every plan in `plans` (only plans of backends available here) and fit the model.
    `wait_budget_s`: seconds it may wait, in all, for other processes to go quiet (default 0 in
    quick mode, 30 s otherwise); with a budget, a disturbed point is measured again."""
    import torch

    from trainpilot.machine.allocator import keep_freed_memory

    keep_freed_memory()  # calibrate under the allocator the training runs with
    say = progress or (lambda _f, _m: None)
    started = time.perf_counter()
    suite = QUICK_SUITE if quick else FULL_SUITE
    min_seconds = 0.04 if quick else 0.3
    # Quick mode measures once and notes the disturbance; a full calibration waits (within a
    # budget) for other processes to settle and measures a disturbed point again.
    if wait_budget_s is None:
        wait_budget_s = 0.0 if quick else 30.0
    attempts, budget = (3 if wait_budget_s > 0 else 1), _WaitBudget(wait_budget_s)

    say(0.0, "profiling the micro-benchmark networks")
    features = [bench_features(spec) for spec in suite]
    states = _states(plans, logical_cpus)
    measured: dict[tuple[str, int], StateRates] = {}
    notes: list[str] = []
    total = len(states) * len(suite)
    done = 0
    for plan, busy in states:
        label = plan.label + (", one core busy" if busy else "")
        steady, first, external = [], [], []
        with BusyLoad(busy) if busy else nullcontext():
            for spec in suite:
                say(0.05 + 0.9 * done / total, f"{label}: {spec.kind} {spec.name}")
                s, f, e = _measure_point(spec, plan, busy, min_seconds, attempts, budget)
                steady.append(s)
                first.append(f)
                external.append(e)
                done += 1
        rates = fit_state(
            features,
            steady,
            first,
            [spec.batch for spec in suite],
            external,
            [spec.name for spec in suite],
            base=measured.get((plan_key(plan), 0)) if busy else None,
            kinds=[spec.kind for spec in suite],
        )
        measured[(plan_key(plan), busy)] = rates
        if rates.external_load > NOISE_TOLERANCE_CORES:
            notes.append(f"{label}: other processes used {rates.external_load:.1f} cores while it was measured")

    say(0.96, "memory bandwidth")
    result: dict[str, PlanCalibration] = {}
    for plan in plans:
        key = plan_key(plan)
        bandwidth = memory_bandwidth(plan.threads, 0.03 if quick else 0.1) if plan.backend == "cpu" else None
        result[key] = PlanCalibration(plan, measured[(key, 0)], measured.get((key, 1)), bandwidth)
    settings = _settings(result, suite, quick, say)
    duration = time.perf_counter() - started
    say(1.0, f"calibrated {len(plans)} plan(s) in {duration:.1f}s")
    return Calibration(
        machine_id=machine_id,
        logical_cpus=logical_cpus,
        plans=result,
        quick=quick,
        duration_s=duration,
        torch_version=str(torch.__version__),
        notes=tuple(notes),
        settings=settings,
    )


def _settings(
    plans: dict[str, PlanCalibration], suite: tuple[BenchSpec, ...], quick: bool, say: Progress
) -> dict[str, dict[str, dict[str, float]]]:
    """channels_last and native mixed precision on the micro-benchmarks (settings_calibration.py).
    Quick mode (a machine's first sight) measures the CPU's layouts only: a job's own step probe
    covers its CPU precisions, and that probe is what a CPU plan is predicted from anyway."""
    from trainpilot.machine.precision_support import native_precision
    from trainpilot.predict.settings_calibration import measure_settings

    def precisions(plan: Plan) -> tuple[str, ...]:
        if quick and plan.backend == "cpu":
            return ()
        return tuple(p for p in ("bf16", "fp16") if native_precision(plan, p))

    return measure_settings(
        plans,
        suite,
        precisions,
        sync=_device_sync,
        min_seconds=0.02 if quick else 0.1,
        progress=lambda f, m: say(0.96 + 0.035 * f, m),
    )
