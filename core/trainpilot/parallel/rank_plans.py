"""Predicting a multi-process (torch.distributed) plan: each rank trains its share of every global
batch in its own process, then the ranks all-reduce the gradients over their link.

    rank step_i = fixed_i + optimizer_i + n_i * per_sample_i      (its own Adam: DDP steps every rank)
    step        = max_i(rank step_i) + ring_allreduce_s(gradient bytes, ranks, link)
    run         = epochs * (full steps * step + last step) + warm-up + start-up of the ranks

Unlike the split plan (split_cost.py) the ranks are processes, so no interpreter lock is shared.
Each rank is predicted by the same calibrated roofline as a single-process plan, under the load the
other ranks put on the machine (ranks of one machine are each other's busy cores), times a slow-down
the caller measured for it (a rank next to a busy process), times the history's correction of that
plan for this workload. The shares are `finish_time_shares` of those costs, unless given.

    from trainpilot.parallel.rank_plans import RankSpec, predict_ranks, choose_ranks_or_single
    multi = predict_ranks(cost, profile, [RankSpec(), RankSpec(slowdown=2.0)], load)
    choice = choose_ranks_or_single(cost, profile, [RankSpec(), RankSpec()], load)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from trainpilot.parallel.link import Link, ring_allreduce_s
from trainpilot.plans import Plan, PlanPrediction
from trainpilot.predict.shares import finish_time_shares
from trainpilot.predict.step_cost import StepCost, epoch_steps, step_cost
from trainpilot.units import seconds as fmt_s


@dataclass(frozen=True)
class RankSpec:
    plan: Plan = field(default_factory=lambda: Plan("cpu", threads=1))
    slowdown: float = 1.0  # measured step-time factor of this rank (2.0 = twice as slow)
    busy_cores: float | None = None  # load this rank sees; None = the observed load + the other ranks' threads


@dataclass(frozen=True)
class MultiRankPrediction:
    ranks: tuple[RankSpec, ...]
    shares: tuple[int, ...]
    compute_s: tuple[float, ...]  # each rank's step on its share (forward, backward, its optimizer step)
    allreduce_s: float
    step_s: float
    run_s: float
    link: Link
    gradient_bytes: float
    detail: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "ranks": [
                {
                    "plan": r.plan.to_dict(),
                    "label": r.plan.label,
                    "short_label": r.plan.short_label,
                    "slowdown": r.slowdown,
                    "busy_cores": r.busy_cores,
                }
                for r in self.ranks
            ],
            "shares": list(self.shares),
            "compute_s": list(self.compute_s),
            "allreduce_s": self.allreduce_s,
            "step_s": self.step_s,
            "run_s": self.run_s,
            "gradient_bytes": self.gradient_bytes,
            "link": self.link.to_dict(),
            **self.detail,
        }


@dataclass(frozen=True)
class RankChoice:
    multi: MultiRankPrediction
    single: PlanPrediction
    chosen: str  # "multi" | "single"
    reasoning: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "multi": self.multi.to_dict(),
            "single": {
                "plan": self.single.plan.to_dict(),
                "label": self.single.plan.label,
                "short_label": self.single.plan.short_label,
                "predicted_s": self.single.predicted_s,
            },
            "chosen": self.chosen,
            "reasoning": list(self.reasoning),
        }


def local_ranks(nproc: int, logical_cpus: int) -> list[RankSpec]:
    """`nproc` ranks of this machine as `--nproc` launches them: each pinned to its own slice of
    the cores (parallel/rank_env.py), so each runs that many threads."""
    if nproc < 2:
        raise ValueError(f"a multi-rank plan has at least 2 ranks, got {nproc}")
    return [RankSpec(Plan("cpu", threads=max(1, logical_cpus // nproc))) for _ in range(nproc)]


def _threads(plan: Plan) -> float:
    return float(plan.threads or 1) if plan.backend == "cpu" else 1.0


def rank_costs(cost: Any, profile: Any, ranks: Sequence[RankSpec], load: Any) -> list[StepCost]:
    """Each rank's calibrated step, under its load, slow-down and the history's correction."""
    from trainpilot.predict.features import features_of

    if cost.calibration is None:
        raise ValueError("this machine is not calibrated yet (`trainpilot headless calibrate`)")
    if not ranks:
        raise ValueError("at least one rank is needed")
    feats = features_of(profile)
    observed = 0.0 if cost.is_described else float(getattr(load, "busy_cores", 0.0) or 0.0)
    total = sum(_threads(r.plan) for r in ranks)
    out = []
    for r in ranks:
        if not r.slowdown > 0:
            raise ValueError(f"a rank's slowdown must be > 0, got {r.slowdown!r}")
        busy = r.busy_cores if r.busy_cores is not None else observed + total - _threads(r.plan)
        sc = step_cost(feats, r.plan, busy, cost.calibration)
        if sc is None:
            raise ValueError(f"{r.plan.label} cannot be predicted on {cost.calibration.described or 'this machine'}")
        single = cost.predict(profile, r.plan, load)
        correction = float(single.detail.get("correction", 1.0)) * float(
            single.detail.get("drift", {}).get("factor", 1.0)
        )
        out.append(sc.scaled(r.slowdown * correction))
    return out


def predict_ranks(
    cost: Any,
    profile: Any,
    ranks: Sequence[RankSpec],
    load: Any,
    *,
    link: Link | None = None,
    shares: Sequence[int] | None = None,
    prepare_s: float = 0.0,
) -> MultiRankPrediction:
    """The whole run on `ranks` processes sharing each global batch of `profile.batch_size`.
    `link` None: this machine's loopback, measured once (`link.loopback_link`), with the start-up
    real launches measured plus `prepare_s`, what preparing this job took (every rank prepares it).
    `shares` None: the finish-time shares of the predicted rank costs; give (b // 2, b - b // 2)
    for the equal split."""
    from trainpilot.predict.features import features_of

    costs = rank_costs(cost, profile, ranks, load)
    if link is None:
        from trainpilot.parallel.launch_cost import with_launch_startup
        from trainpilot.parallel.link import loopback_link

        # the group's start-up as real --nproc launches measured it, not only the loopback probe
        link = with_launch_startup(loopback_link(machine_id=cost.machine_id), len(ranks), prepare_s=prepare_s)
    return predict_from_costs(features_of(profile), tuple(ranks), costs, link, shares)


def predict_from_costs(
    feats: Any, ranks: tuple[RankSpec, ...], costs: Sequence[StepCost], link: Link, shares: Sequence[int] | None = None
) -> MultiRankPrediction:
    """The multi-rank run from each rank's step cost (ranks may be on different machines: cluster.py)."""

    def split(batch: int) -> tuple[int, ...]:
        if shares is not None and batch == feats.batch_size:
            return tuple(shares)
        return finish_time_shares(batch, [c.per_sample_s for c in costs], [c.fixed_s + c.optimizer_s for c in costs])

    full = split(feats.batch_size)
    if sum(full) != feats.batch_size or len(full) != len(costs):
        raise ValueError(
            f"shares {tuple(full)} must be {len(costs)} integers summing to the batch ({feats.batch_size})"
        )
    allreduce = ring_allreduce_s(feats.weight_bytes, len(costs), link)

    def step(parts: tuple[int, ...]) -> tuple[tuple[float, ...], float]:
        compute = tuple(c.step_s(n) if n else 0.0 for c, n in zip(costs, parts, strict=False))
        return compute, max(compute) + allreduce

    compute, step_s = step(full)
    steps, last_n = epoch_steps(feats)
    _c, last_s = step(split(last_n))
    warmup = max(c.warmup_steps * cs for c, cs in zip(costs, compute, strict=False))
    run_s = feats.epochs * (steps * step_s + last_s) + warmup + link.startup_s
    return MultiRankPrediction(
        ranks,
        tuple(full),
        compute,
        allreduce,
        step_s,
        run_s,
        link,
        feats.weight_bytes,
        {
            "startup_s": link.startup_s,
            "warmup_s": warmup,
            "rank_busy_cores": [c.busy_cores for c in costs],
            "steps_per_epoch": feats.steps,
        },
    )


def best_single(cost: Any, profile: Any, load: Any) -> PlanPrediction:
    """The fastest single-process plan the cost model predicts here (split plans excluded)."""
    from trainpilot.plans import SPLIT

    timed = [
        p
        for p in (cost.predict(profile, plan, load) for plan in cost.plans() if plan.backend != SPLIT)
        if not p.excluded and p.predicted_s is not None
    ]
    if not timed:
        raise ValueError("no single-process plan can be predicted here")
    return min(timed, key=lambda p: p.predicted_s)


def choose_ranks_or_single(
    cost: Any,
    profile: Any,
    ranks: Sequence[RankSpec],
    load: Any,
    *,
    link: Link | None = None,
    shares: Sequence[int] | None = None,
    prepare_s: float = 0.0,
) -> RankChoice:
    """The agent's choice between the multi-rank plan and the best single-process plan, by
    predicted run time, with the trace lines that say why."""
    multi = predict_ranks(cost, profile, ranks, load, link=link, shares=shares, prepare_s=prepare_s)
    single = best_single(cost, profile, load)
    assert single.predicted_s is not None
    n = len(ranks)
    slow = max(multi.compute_s)
    lines = [
        f"{n} ranks ({', '.join(r.plan.label for r in ranks)}): predicted {fmt_s(multi.run_s)};"
        f" per step the slowest rank {slow * 1e3:.1f} ms on shares {'+'.join(map(str, multi.shares))},"
        f" all-reduce of {multi.gradient_bytes / 2**20:.2f} MiB {multi.allreduce_s * 1e3:.2f} ms"
        f" ({multi.link.bandwidth_bytes_per_s / 1e9:.2f} GB/s, {multi.link.latency_s * 1e6:.0f} µs latency;"
        f" {multi.link.source}), start-up {multi.link.startup_s:.1f} s",
        f"best single process: {single.plan.label}, predicted {fmt_s(single.predicted_s)}",
    ]
    if multi.run_s < single.predicted_s:
        chosen = "multi"
        lines.append(
            f"choose {n} ranks: predicted {single.predicted_s / multi.run_s - 1:.0%} faster than {single.plan.label}"
        )
    else:
        chosen = "single"
        lines.append(
            f"choose {single.plan.label}: {n} ranks are predicted {multi.run_s / single.predicted_s - 1:.0%} slower"
        )
    return RankChoice(multi, single, chosen, tuple(lines))
