"""What the agent must beat, at the same measured speed-up: the same sparsity in every layer
(uniform), and an L1-magnitude heuristic (one global ranking of channels by L1 norm across all
layers, so layers with small weights lose more). Both remove channels with the same L1 criterion
within a layer as the agent's configurations do; only the per-layer allocation differs.

Each baseline's overall ratio is found by bisection on *measured* speed-up (dense and candidate
interleaved in each measurement), the smallest ratio that reaches the agent's speed-up; then it
gets the same deployment fine-tune as the agent's model, and all three are measured once more,
together with the dense model, in one interleaved run.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .cycles import StepTimes, measure_steps
from .deploy import Tuned, fine_tune
from .prune import MAX_SPARSITY, PrunedModel

BISECTION_STEPS = 5  # 0.9 / 2^5: the ratio to within 0.03


@dataclass(frozen=True)
class Matched:
    name: str  # "uniform" | "l1-global"
    ratio: float
    search_speedup: float  # measured during the bisection


@dataclass(frozen=True)
class Row:
    name: str  # "agent" | "uniform" | "l1-global"
    speedup: float  # measured, in the final interleaved run
    accuracy: float  # test
    accuracy_drop: float  # points
    kept: dict[str, int]


def pruned_by(kind: str, evaluator: Any, ratio: float) -> PrunedModel:
    if kind == "uniform":
        return evaluator.prune({layer.name: ratio for layer in evaluator.layers.prunable})
    if kind == "l1-global":
        from .prune import prune

        return prune(evaluator.dense, evaluator.layers, {}, evaluator.sample_shape, global_ratio=ratio)
    raise ValueError(f"unknown baseline '{kind}'")


def _speedup(evaluator: Any, model: Any, repeats: int) -> float:
    times = measure_steps({"dense": evaluator.dense, "pruned": model}, evaluator.sample_shape, evaluator.num_classes,
                          batch=evaluator.timing_batch, threads=evaluator.threads, repeats=repeats, seed=evaluator.seed)
    return times.speedup("pruned")


def match_speedup(kind: str, evaluator: Any, speedup: float, *, repeats: int) -> tuple[PrunedModel, Matched]:
    """The smallest overall ratio of baseline `kind` whose measured speed-up reaches `speedup`
    (or the largest ratio allowed, when none does)."""
    lo, hi = 0.0, MAX_SPARSITY
    found: tuple[PrunedModel, float, float] | None = None
    for _ in range(BISECTION_STEPS):
        mid = (lo + hi) / 2.0
        candidate = pruned_by(kind, evaluator, mid)
        got = _speedup(evaluator, candidate.model, repeats)
        if got >= speedup:
            hi, found = mid, (candidate, got, mid)
        else:
            lo = mid
    if found is None:
        candidate = pruned_by(kind, evaluator, MAX_SPARSITY)
        found = (candidate, _speedup(evaluator, candidate.model, repeats), MAX_SPARSITY)
    model, got, ratio = found
    return model, Matched(kind, ratio, got)


def compare(report: Any, *, repeats: int, final_repeats: int) -> tuple[list[Row], StepTimes, list[Matched]]:
    """The agent's deployed model against both baselines matched to its measured speed-up."""
    ev = report.evaluator
    cfg = report.config
    agent_speedup = report.measured.speedup("pruned")
    tuned: dict[str, Tuned] = {"agent": report.tuned}
    matched = []
    for kind in ("uniform", "l1-global"):
        model, m = match_speedup(kind, ev, agent_speedup, repeats=repeats)
        matched.append(m)
        tuned[kind] = fine_tune(model, ev.train, report.test_data, epochs=cfg.deploy_epochs, batch=cfg.batch_size, seed=cfg.seed,
                                threads=ev.threads, teacher=ev.dense)
    times = measure_steps({"dense": ev.dense, **{k: t.pruned.model for k, t in tuned.items()}}, ev.sample_shape, ev.num_classes,
                          batch=ev.timing_batch, threads=ev.threads, repeats=final_repeats, seed=cfg.seed)
    rows = [Row(k, times.speedup(k), t.accuracy, (report.dense_accuracy - t.accuracy) * 100.0, dict(t.pruned.kept)) for k, t in tuned.items()]
    return rows, times, matched

