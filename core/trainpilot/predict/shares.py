"""How a batch is divided among workers of different speed.

StarPU's dmda scheduler gives each task to the worker that would finish it first, from a
per-worker cost model. A training step is `batch` identical samples, so that rule becomes: worker
i spends `overhead_s[i] + n_i * per_sample_s[i]` on its n_i samples (the fixed part is its per-step
cost: dispatch, optimizer, the host side of a launch), and the shares are the integers summing to
`batch` that make the slowest worker finish first, i.e. equal predicted finish times up to one
sample. Without overheads that is a split in proportion to speed.

    finish_time_shares(64, per_sample_s=[1e-3, 2e-3])          -> (43, 21)
    finish_time_shares(64, [1e-3, 1e-3], overhead_s=[0, 0.016]) -> (40, 24)
    proportional_shares(10, speeds=[3.0, 1.0])                 -> (8, 2)    (7.5 / 2.5, rounded by finish time)

Every worker gets at least one sample when the batch has enough of them (a worker in the plan that
gets nothing would idle while still costing its share of the combine); with fewer samples than
workers the ones that would finish a single sample first get one each and the rest 0. Whether a
slow worker should be in the plan at all is the planner's question, not this module's: it compares
the split with every single-worker plan.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Sequence


def _checked(name: str, values: Sequence[float], *, positive: bool) -> list[float]:
    out = []
    for i, v in enumerate(values):
        v = float(v)
        if not math.isfinite(v) or (v <= 0 if positive else v < 0):
            bound = "> 0" if positive else ">= 0"
            raise ValueError(f"{name}[{i}] must be a finite number {bound}, got {v!r}")
        out.append(v)
    return out


def finish_time_shares(
    batch: int, per_sample_s: Sequence[float], overhead_s: Sequence[float] | None = None
) -> tuple[int, ...]:
    """Integer shares of `batch` (summing to it exactly) that minimise the latest predicted finish
    time `overhead_s[i] + n_i * per_sample_s[i]` of the workers given samples.

    Exact, not a heuristic: the optimum holds the `batch` cheapest "next sample" completion times
    o_i + j*c_i (j = 1, 2, ...), which is what assigning samples one by one to the earliest finisher
    picks. The continuous water level is solved first, so a large batch costs O(workers log
    workers), not one heap operation per sample."""
    if isinstance(batch, bool) or not isinstance(batch, int) or batch < 0:
        raise ValueError(f"batch must be an integer >= 0, got {batch!r}")
    cost = _checked("per_sample_s", per_sample_s, positive=True)
    k = len(cost)
    if k == 0:
        raise ValueError("at least one worker is needed")
    fixed = _checked("overhead_s", overhead_s, positive=False) if overhead_s is not None else [0.0] * k
    if len(fixed) != k:
        raise ValueError(f"overhead_s has {len(fixed)} entries for {k} workers")
    if batch < k:
        # too few samples for everyone: one each to those that finish a single sample first
        first = sorted(range(k), key=lambda i: (fixed[i] + cost[i], i))[:batch]
        return tuple(1 if i in first else 0 for i in range(k))
    level = _water_level(batch, cost, fixed)
    shares = [max(1, int(math.floor((level - fixed[i]) / cost[i] + 1e-9))) for i in range(k)]
    # float error in the level can leave a few samples over or under: fix them one at a time,
    # always taking the most expensive last sample off, or adding the cheapest next one
    while sum(shares) > batch:
        i = max((i for i in range(k) if shares[i] > 1), key=lambda i: (fixed[i] + shares[i] * cost[i], -i))
        shares[i] -= 1
    heap = [(fixed[i] + (shares[i] + 1) * cost[i], i) for i in range(k)]
    heapq.heapify(heap)
    for _ in range(batch - sum(shares)):
        _t, i = heapq.heappop(heap)
        shares[i] += 1
        heapq.heappush(heap, (fixed[i] + (shares[i] + 1) * cost[i], i))
    return tuple(shares)


def _water_level(batch: int, cost: list[float], fixed: list[float]) -> float:
    """The time T at which sum_i max(1, (T - o_i) / c_i) = batch (the continuous optimum)."""
    lo = min(o + c for o, c in zip(fixed, cost, strict=False))
    hi = max(fixed) + batch * max(cost)

    def held(t: float) -> float:
        return sum(max(1.0, (t - o) / c) for o, c in zip(fixed, cost, strict=False))

    for _ in range(100):  # bisection: 100 halvings reach float resolution on any sane range
        mid = 0.5 * (lo + hi)
        if held(mid) < batch:
            lo = mid
        else:
            hi = mid
    return lo


def proportional_shares(batch: int, speeds: Sequence[float]) -> tuple[int, ...]:
    """Shares in proportion to `speeds` (samples per second, or any relative speed): the finish-time
    split with no fixed cost, so the rounding also goes to whoever finishes first."""
    rates = _checked("speeds", speeds, positive=True)
    return finish_time_shares(batch, [1.0 / s for s in rates])


def predicted_finish_s(
    shares: Sequence[int], per_sample_s: Sequence[float], overhead_s: Sequence[float] | None = None
) -> tuple[float, ...]:
    """Each worker's predicted time for its share (0 for a worker given nothing: it does not step)."""
    fixed = list(overhead_s) if overhead_s is not None else [0.0] * len(shares)
    return tuple(o + n * c if n else 0.0 for n, c, o in zip(shares, per_sample_s, fixed, strict=False))


def shard_weights(shares: Sequence[int]) -> tuple[float, ...]:
    """The weight of each worker's mean-loss gradient in the whole batch's: n_i / batch. Summing
    w_i * grad_i over workers gives the gradient of the mean loss over the whole batch."""
    total = sum(shares)
    if total <= 0:
        raise ValueError("shares must hold at least one sample")
    return tuple(n / total for n in shares)
