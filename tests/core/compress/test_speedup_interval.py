"""How sure a measured speed-up is (speedup_interval.py), and the rules that read it: the aim past
the noise (speed_margin.py) and the deployment's speed rule (deploy.judge). Constructed step times
only: nothing here is timed."""
from __future__ import annotations

import math
import random

import pytest

from trainpilot.compress.deploy import judge
from trainpilot.compress.drop_interval import drop_interval
from trainpilot.compress.speed_margin import MAX_AIM, aim_from
from trainpilot.compress.speedup_interval import MIN_ROUNDS, order_rank, predicted_speedup, speedup_interval


def rounds_at(ratio: float, sigma: float, n: int, rng: random.Random) -> tuple[list[float], list[float]]:
    """n paired rounds: the dense step 10 ms times a round-wide slowdown both models share, the
    pruned one 10 / ratio ms times the same slowdown and its own log-normal noise of `sigma`."""
    dense, pruned = [], []
    for _ in range(n):
        shared = math.exp(rng.gauss(0.0, 0.3))  # a busy round slows both: pairing cancels it
        dense.append(0.010 * shared)
        pruned.append(0.010 / ratio * shared * math.exp(rng.gauss(0.0, sigma)))
    return dense, pruned


def test_the_interval_covers_the_true_ratio_at_its_confidence() -> None:
    """2,000 timings of 21 rounds at a true 1.6x with 10 % noise per round: the order-statistic
    interval (ranks 6 and 16, at least 97.3 %) covers 1.6 about that often."""
    rng = random.Random(7)
    covered = 0
    for _ in range(2000):
        iv = speedup_interval(*rounds_at(1.6, 0.10, 21, rng))
        covered += iv.low <= 1.6 <= iv.high
    assert 0.955 <= covered / 2000 <= 0.99


def test_the_interval_narrows_as_rounds_grow_and_pairing_cancels_shared_noise() -> None:
    rng = random.Random(3)
    short = speedup_interval(*rounds_at(1.6, 0.10, 21, rng))
    long = speedup_interval(*rounds_at(1.6, 0.10, 201, rng))
    assert long.high - long.low < (short.high - short.low) * 0.6
    # a 30 % slowdown shared by both models in a round moves no paired ratio: no per-model noise, no width
    exact = speedup_interval(*rounds_at(1.6, 0.0, 21, rng))
    assert exact.low == pytest.approx(1.6) and exact.high == pytest.approx(1.6)


def test_the_bounds_are_order_statistics_of_the_paired_ratios() -> None:
    dense = [1.0] * 21
    ratios = [1.0 + i / 20 for i in range(21)]  # 1.00, 1.05, ..., 2.00
    iv = speedup_interval(dense, [1.0 / r for r in reversed(ratios)])
    assert order_rank(21) == 6 and iv.ratio == pytest.approx(1.5)
    assert iv.low == pytest.approx(ratios[5]) and iv.high == pytest.approx(ratios[15])
    assert iv.rounds == 21 and iv.to_dict()["speedup_low"] == iv.low
    assert iv.sure_above(1.0) == pytest.approx(1.0) and iv.sure_above(1.5 + 1e-9) < 0.6 < iv.sure_above(1.3)
    assert iv.text() == "1.50x (95% interval 1.25 to 1.75x over 21 rounds)"


def test_too_few_rounds_have_no_interval() -> None:
    assert order_rank(MIN_ROUNDS) == 1 and order_rank(MIN_ROUNDS - 1) is None
    with pytest.raises(ValueError, match="5 rounds cannot bound a median at 95%; time at least 6"):
        speedup_interval([1.0] * 5, [0.5] * 5)
    with pytest.raises(ValueError, match="must pair"):
        speedup_interval([1.0] * 6, [0.5] * 7)


def test_a_prediction_is_exact() -> None:
    p = predicted_speedup(1.7)
    assert p.exact and p.low == p.high == 1.7 and p.sure_above(1.5) == 1.0 and p.text() == "1.70x (predicted)"


def test_the_aim_is_the_self_timing_noise_and_has_a_cap() -> None:
    dense = [1.0] * 21
    noise = speedup_interval(dense, [1.0 / (0.9 + 0.01 * i) for i in range(21)])  # itself: 0.90 ... 1.10
    aim = aim_from(noise)
    assert aim.aim == pytest.approx(1.0 / 0.95) and not aim.capped  # the 6th smallest of 21 is 0.95
    assert "aiming at 1.58x: the target 1.5x times 1.053" in aim.text(1.5)
    wild = aim_from(speedup_interval(dense, [1.0 / (0.5 + 0.05 * i) for i in range(21)]))
    assert wild.aim == MAX_AIM and wild.capped


STRADDLING = speedup_interval([1.0] * 21, [1.0 / (1.35 + 0.02 * i) for i in range(21)])  # 1.35 ... 1.75, median 1.55


def test_the_confident_rule_refuses_a_speed_up_whose_interval_straddles_the_target() -> None:
    assert STRADDLING.low < 1.5 < STRADDLING.ratio
    drop = drop_interval(0, 0, 270)
    confident = judge(drop, STRADDLING, max_drop=1.0, target_speedup=1.5, rule="confident")
    assert not confident.deployed and "the speed-up's interval reaches below the target 1.5x (--deploy-rule confident" in confident.reason
    point = judge(drop, STRADDLING, max_drop=1.0, target_speedup=1.5, rule="point")
    assert point.deployed and "1.55x (95% interval 1.45 to 1.65x over 21 rounds; " in point.reason
    assert f"{STRADDLING.sure_above(1.5):.0%} sure it clears 1.5x" in point.reason and point.speed is STRADDLING


def test_a_speed_up_below_the_target_says_how_far_and_how_sure() -> None:
    slow = speedup_interval([1.0] * 21, [1.0 / (1.30 + 0.01 * i) for i in range(21)])  # median 1.40
    verdict = judge(drop_interval(0, 0, 270), slow, max_drop=1.0, target_speedup=1.5)
    assert not verdict.deployed
    assert "measured speed-up 1.40x (95% interval 1.35 to 1.45x over 21 rounds; 0% sure it clears 1.5x) is below the target 1.5x (6.7% short)" in verdict.reason
