"""How sure a measured speed-up is: an interval over paired timing rounds.

The dense and the pruned model are timed interleaved, one step of each per round (cycles.py), so
whatever slows the machine during a round slows both. Each round gives one paired ratio, the dense
step's time over the pruned step's, and the speed-up is the median of those ratios. Its interval
is the distribution-free one for a median: with n rounds the number of ratios below the true median
is Binomial(n, 1/2), so the k-th smallest and the k-th largest ratio bound it with a confidence of
at least 1 - 2 P(B < k). It assumes only that the rounds are independent draws of one ratio; it
needs no normal shape and no estimate of the spread, which matters here because a step's time on a
shared machine has a long right tail (another process's burst), and one bad round moves a mean but
not an order statistic. It is a closed form, so every report of the same rounds gives the same
interval. Below MIN_ROUNDS rounds no pair of order statistics reaches 95 %, and there is no interval.

A described machine's cycles are the cost model's predictions: exact, an interval of one point.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from trainpilot.compress.drop_interval import CONFIDENCE

MIN_ROUNDS = 6  # the fewest rounds whose extreme ratios bound the median at 95 % (1 - 2 / 2^6 = 96.9 %)


@dataclass(frozen=True)
class SpeedupInterval:
    ratio: float  # the median of the paired ratios (dense step / pruned step), what the rules compare
    low: float  # the interval's lower end
    high: float  # its upper end
    rounds: int  # paired rounds timed (0: a prediction, exact)
    ratios: tuple[float, ...] = ()  # the paired ratios, sorted (empty for a prediction)
    confidence: float = CONFIDENCE
    label: str = "measured"  # "measured" | "predicted"

    @property
    def exact(self) -> bool:
        return self.rounds == 0

    def sure_above(self, threshold: float) -> float:
        """How sure the true speed-up is at least `threshold`: the level of the one-sided interval
        whose lower end is the lowest ratio at or above `threshold` (the sign test's: every round below
        it is a round the lower end must leave out)."""
        if self.exact:
            return 1.0 if self.ratio >= threshold else 0.0
        below = sum(1 for r in self.ratios if r < threshold)
        return 1.0 - _binomial_cdf(below, len(self.ratios))

    def decides(self, threshold: float) -> bool:
        """Whether the interval lies wholly on one side of `threshold`."""
        return self.low >= threshold or self.high < threshold

    def text(self, clears: float | None = None) -> str:
        """'1.58x (95 % interval 1.49 to 1.66x over 21 rounds)'; a prediction: '1.58x (predicted)'.
        With `clears`, how sure it clears that: '...over 21 rounds; 99 % sure it clears 1.5x)'."""
        if self.exact:
            return f"{self.ratio:.2f}x ({self.label})"
        sure = "" if clears is None else f"; {self.sure_above(clears):.0%} sure it clears {clears:g}x"
        return (
            f"{self.ratio:.2f}x ({self.confidence:.0%} interval {self.low:.2f} to {self.high:.2f}x"
            f" over {self.rounds} rounds{sure})"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "speedup": self.ratio,
            "speedup_low": self.low,
            "speedup_high": self.high,
            "speedup_confidence": self.confidence,
            "speedup_rounds": self.rounds,
        }


def _binomial_cdf(k: int, n: int) -> float:
    """P(B <= k) for B ~ Binomial(n, 1/2)."""
    return sum(math.comb(n, i) for i in range(max(k, -1) + 1)) / 2.0**n


def order_rank(rounds: int, confidence: float = CONFIDENCE) -> int | None:
    """The largest k whose k-th smallest and k-th largest of `rounds` ratios bound the median at
    `confidence` or more; None when even the extremes do not (fewer than MIN_ROUNDS at 95 %)."""
    alpha = (1.0 - confidence) / 2.0
    k = 0
    while k < rounds // 2 and _binomial_cdf(k, rounds) <= alpha:  # P(B <= k) = P(B < k + 1)
        k += 1
    return k if k >= 1 else None


def speedup_interval(
    dense_s: Sequence[float], pruned_s: Sequence[float], confidence: float = CONFIDENCE
) -> SpeedupInterval:
    """The speed-up and its interval from step times timed in paired rounds (entry i of each in round i)."""
    if len(dense_s) != len(pruned_s):
        raise ValueError(f"paired rounds must pair: {len(dense_s)} dense and {len(pruned_s)} pruned step times")
    if any(t <= 0.0 for t in (*dense_s, *pruned_s)):
        raise ValueError("a step time must be positive")
    ratios = tuple(sorted(d / p for d, p in zip(dense_s, pruned_s, strict=True)))
    k = order_rank(len(ratios), confidence)
    if k is None:
        raise ValueError(f"{len(ratios)} rounds cannot bound a median at {confidence:.0%}; time at least {MIN_ROUNDS}")
    ratio = statistics.median(ratios)
    return SpeedupInterval(ratio, ratios[k - 1], ratios[-k], len(ratios), ratios, confidence)


def predicted_speedup(ratio: float) -> SpeedupInterval:
    """A described machine's speed-up: the cost model's prediction, exact."""
    return SpeedupInterval(ratio, ratio, ratio, 0, (), CONFIDENCE, "predicted")
