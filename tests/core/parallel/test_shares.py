"""Shares of a batch: exact sums, proportional to speed, equal finish times with fixed costs, and
the edge cases (one worker, too few samples, a zero speed) that the ddp ranks and the split plan meet."""
from __future__ import annotations

import itertools
import random

import pytest

from trainpilot.predict.shares import finish_time_shares, predicted_finish_s, proportional_shares, shard_weights


def _brute_force_makespan(batch: int, cost: list[float], fixed: list[float]) -> float:
    """The best latest-finish over every split with each worker >= 1 (small cases only)."""
    best = float("inf")
    for head in itertools.product(range(1, batch + 1), repeat=len(cost) - 1):
        last = batch - sum(head)
        if last < 1:
            continue
        shares = (*head, last)
        best = min(best, max(predicted_finish_s(shares, cost, fixed)))
    return best


def test_shares_sum_to_the_batch_and_follow_speed() -> None:
    assert proportional_shares(64, [2.0, 1.0]) in ((43, 21), (42, 22))
    assert proportional_shares(100, [1.0, 1.0, 2.0]) == (25, 25, 50)
    assert proportional_shares(10, [3.0, 1.0]) == (8, 2)  # 7.5/2.5: 8/3 s beats 7/3 s + a 3 s straggler
    for batch in (1, 2, 3, 7, 64, 1000, 10**7):
        for speeds in ([1.0], [1.0, 1.0], [5.0, 1.0, 0.3], [1.0, 2.0, 3.0, 4.0]):
            shares = proportional_shares(batch, speeds)
            assert sum(shares) == batch and len(shares) == len(speeds)
    big = proportional_shares(10**6, [1.0, 3.0])
    assert big == (250000, 750000)


def test_one_worker_takes_the_whole_batch() -> None:
    assert proportional_shares(64, [0.5]) == (64,)
    assert finish_time_shares(1, [1e-3], [0.5]) == (1,)


def test_fixed_step_costs_equalise_finish_time() -> None:
    # equal speed, but the second worker pays 16 ms per step before its first sample: it gets less
    shares = finish_time_shares(64, [1e-3, 1e-3], overhead_s=[0.0, 0.016])
    assert shares == (40, 24)
    assert predicted_finish_s(shares, [1e-3, 1e-3], [0.0, 0.016]) == pytest.approx((0.040, 0.040))


def test_matches_brute_force_optimum() -> None:
    rng = random.Random(3)
    for _ in range(60):
        k = rng.choice([2, 3])
        batch = rng.randint(k, 24)
        cost = [rng.uniform(0.1, 3.0) for _ in range(k)]
        fixed = [rng.choice([0.0, rng.uniform(0.0, 5.0)]) for _ in range(k)]
        shares = finish_time_shares(batch, cost, fixed)
        assert sum(shares) == batch and min(shares) >= 1
        assert max(predicted_finish_s(shares, cost, fixed)) == pytest.approx(_brute_force_makespan(batch, cost, fixed))


def test_batch_smaller_than_workers_gives_the_first_finishers_one_each() -> None:
    assert finish_time_shares(2, [3.0, 1.0, 2.0]) == (0, 1, 1)
    assert finish_time_shares(0, [1.0, 1.0]) == (0, 0)
    assert proportional_shares(1, [1.0, 4.0]) == (0, 1)


@pytest.mark.parametrize("speeds", [[1.0, 0.0], [1.0, -2.0], [float("nan")], [float("inf"), 1.0], []])
def test_bad_speeds_are_refused(speeds: list[float]) -> None:
    with pytest.raises(ValueError):
        proportional_shares(8, speeds)


def test_bad_batch_and_mismatched_overheads_are_refused() -> None:
    with pytest.raises(ValueError):
        finish_time_shares(-1, [1.0])
    with pytest.raises(ValueError):
        finish_time_shares(8, [1.0, 1.0], overhead_s=[0.0])
    with pytest.raises(ValueError):
        finish_time_shares(8, [1.0], overhead_s=[-0.1])


def test_shard_weights_are_the_sample_fractions() -> None:
    assert shard_weights((3, 1)) == (0.75, 0.25)
    with pytest.raises(ValueError):
        shard_weights((0, 0))
