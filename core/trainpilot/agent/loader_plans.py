"""DataLoader workers as part of a plan: for a job whose data is a Dataset, every single-device plan
comes in one variant per worker count (none, 1, 2, 4, ... up to the cores), so the agent trades
loading processes against compute threads on the same cores by predicting each pair."""

from __future__ import annotations

from typing import Any

from trainpilot.plans import Availability, Plan


def worker_counts(logical_cpus: int) -> list[int]:
    """0 (the training process loads), then 1, 2, 4, ... up to the core count."""
    counts, n = [0], 1
    while n < logical_cpus:
        counts.append(n)
        n *= 2
    counts.append(max(logical_cpus, 1))
    return sorted(set(counts))


def with_loader_workers(
    candidates: list[tuple[Plan, Availability]], profile: Any, logical_cpus: int
) -> list[tuple[Plan, Availability]]:
    loader = getattr(profile, "loader", "memory")
    if loader == "pinned":
        pinned = int(getattr(profile, "pinned_workers", 0) or 0)
        return [(p.with_loader(pinned or None) if not p.workers else p, a) for p, a in candidates]
    if loader != "workers":
        return candidates
    out: list[tuple[Plan, Availability]] = []
    for plan, avail in candidates:
        if plan.workers or not avail:  # a split, or a plan that cannot run anyway: once
            out.append((plan, avail))
            continue
        out.extend((plan.with_loader(w or None), avail) for w in worker_counts(logical_cpus))
    return out


def loader_line(profile: Any) -> str | None:
    """What the trace says about loading before the plans, or None when the data is in memory."""
    load_s = float(getattr(profile, "load_s_per_batch", 0.0) or 0.0)
    loader = getattr(profile, "loader", "memory")
    if loader == "memory":
        return None
    cost = f"loading a batch costs {load_s * 1e3:.1f} ms in one process"
    if loader == "pinned":
        return f"{cost}; the job pins {getattr(profile, 'pinned_workers', 0)} DataLoader worker(s)"
    if loader == "in-process":
        return f"{cost}; it stays in the training process (0 workers): {getattr(profile, 'loader_note', '')}"
    return f"{cost}; every plan is weighed with each DataLoader worker count"


def rank_loader_workers(
    profile: Any, rank_plan: Plan, world_size: int, busy_cores: float, calibration: Any, fallback: int | None
) -> int | None:
    """The DataLoader workers of one rank of `world_size`, on its own core slice (`rank_plan.threads`
    cores; workers a rank forks inherit its pinning): each count the slice allows is predicted on
    the rank's share of a batch (its compute and its loading, 1/world_size of the whole) next to
    `busy_cores` of other load (the other ranks), and the fastest is taken. A job that pins its
    workers keeps them; data in memory takes none. Without a calibration there is nothing to
    predict with: `fallback` (the single-process choice) shared among the ranks."""
    import dataclasses

    from trainpilot.predict.features import features_of
    from trainpilot.predict.roofline import estimate

    loader = getattr(profile, "loader", "memory")
    if loader == "pinned":
        return int(getattr(profile, "pinned_workers", 0) or 0) or None
    if loader != "workers":
        return None
    threads = int(rank_plan.threads or 1)
    if calibration is None:
        return (int(fallback or 0) // world_size) or None
    whole = features_of(profile)
    share = dataclasses.replace(
        whole,
        batch_size=max(1, whole.batch_size // world_size),
        load_s_per_batch=whole.load_s_per_batch / world_size,
        probe_step_s=whole.probe_step_s / world_size,
        probe_all_s=whole.probe_all_s / world_size,
    )
    timed = []
    for workers in worker_counts(threads):
        found = estimate(share, rank_plan.with_loader(workers or None), busy_cores, calibration)
        if found is not None:
            timed.append((found.run_s, workers))
    if not timed:
        return (int(fallback or 0) // world_size) or None
    return min(timed)[1] or None
