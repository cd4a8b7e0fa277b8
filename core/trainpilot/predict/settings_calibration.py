"""Calibration of the step settings that keep the math: the micro-benchmark networks trained in
channels_last (convolutional ones) and in each mixed precision the device runs natively, their
steps alternated with the same network's in fp32 NCHW so both see the same moment of a shared
machine. Per plan and variant it stores, per layer kind, what the setting does to that kind's
FLOP cost (calibration.Calibration.settings); predict/settings_cost.py applies it to a job.

A job's own step probe, where there is one, outranks this (its shapes are the job's); this is
what a plan with no probe is predicted from (a GPU, or a job on another backend).
"""

from __future__ import annotations

import statistics
from collections.abc import Callable

from trainpilot.plans import CHANNELS_LAST, Plan, settings_key
from trainpilot.predict.calibration import PlanCalibration, plan_key
from trainpilot.predict.microbench import BenchSpec, BenchTrainer, bench_features

Progress = Callable[[float, str], None]
ROUNDS = 9  # alternated steps per network and variant, after one warm-up step each


def variants_for(kind: str, precisions: tuple[str, ...]) -> list[tuple[str | None, str | None]]:
    layouts: list[str | None] = [None, CHANNELS_LAST] if kind == "conv" else [None]
    return [(fmt, p) for p in (None, *precisions) for fmt in layouts if fmt or p]


def _alternated(
    spec: BenchSpec,
    plan: Plan,
    variants: list[tuple[str | None, str | None]],
    sync: Callable[[], None] | None,
    min_seconds: float,
) -> list[float]:
    """The fastest step of the default network and of each variant, their steps alternated."""
    import torch

    from trainpilot.job.step_probe import fastest_alternated

    device = (plan.device or plan.backend) if plan.backend in ("cuda", "mps") else "cpu"
    previous = torch.get_num_threads()
    if plan.backend == "cpu" and plan.threads:
        torch.set_num_threads(plan.threads)
    try:
        benches = [BenchTrainer(spec, device, sync, memory_format=f, precision=p) for f, p in [(None, None), *variants]]
        steps = [bench.timed for bench in benches]
        return fastest_alternated(steps, budget_s=min_seconds * len(benches), min_rounds=3, max_rounds=ROUNDS)
    finally:
        torch.set_num_threads(previous)


def measure_settings(
    plans: dict[str, PlanCalibration],
    suite: tuple[BenchSpec, ...],
    precisions: Callable[[Plan], tuple[str, ...]],
    *,
    sync: Callable[[str], Callable[[], None] | None],
    min_seconds: float,
    progress: Progress | None = None,
) -> dict[str, dict[str, dict[str, float]]]:
    """plan key -> variant -> kind -> FLOP-cost ratio, for every eager idle plan in `plans`.
    `precisions(plan)`: the mixed precisions that plan's device runs natively."""
    say = progress or (lambda _f, _m: None)
    specs = [s for s in suite if s.kind in ("conv", "dense")]
    todo = [p for p in plans.values() if p.plan.backend in ("cpu", "cuda", "mps") and not p.plan.mode]
    out: dict[str, dict[str, dict[str, float]]] = {}
    for n, cal in enumerate(todo):
        wanted = precisions(cal.plan)
        per: dict[str, dict[str, list[float]]] = {}
        for spec in specs:
            variants = variants_for(spec.kind, wanted)
            if not variants:
                continue
            say(n / max(len(todo), 1), f"{cal.plan.label}: {spec.name} in {len(variants)} other setting(s)")
            times = _alternated(spec, cal.plan, variants, sync(cal.plan.backend), min_seconds)
            feats = bench_features(spec)
            term = feats.flops_by_kind.get(spec.kind, 0.0) * spec.batch * cal.idle.coef.get(spec.kind, 0.0)
            if term <= 0.2 * times[0]:  # a step mostly fixed costs says little about this kind's FLOPs
                continue
            for (fmt, precision), t in zip(variants, times[1:], strict=False):
                # the step's change, all of it put on this kind's FLOPs (the rest of a benchmark
                # step barely changes with the layout)
                ratio = 1.0 + (t - times[0]) / term
                key = settings_key(fmt, precision)
                per.setdefault(key, {}).setdefault(spec.kind, []).append(max(ratio, 0.05))
        if per:
            out[plan_key(cal.plan)] = {
                k: {kind: statistics.median(v) for kind, v in kinds.items()} for k, kinds in per.items()
            }
    return out
