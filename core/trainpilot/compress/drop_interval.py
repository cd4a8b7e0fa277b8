"""How sure an accuracy drop is: a paired interval over the test samples both models scored.

The dense and the pruned model are scored on the same test samples, so the drop is a difference
of paired proportions. Only the samples on which the two disagree carry information about it:
`lost` (the dense model right, the pruned wrong) and `gained` (the other way). The interval is the
Wald interval with Bonett and Price's Laplace adjustment (Bonett & Price 2012, "Adjusted Wald
confidence interval for a difference of binomial proportions based on paired data"): one added to
each discordant count and two to the sample count. Fagerland, Lydersen & Laake (2014, "Recommended
tests and confidence intervals for paired binomial proportions") recommend it among three for this
case; unlike the exact interval conditioned on the discordant pairs, it does not collapse to a
single point when the two models disagree on no sample (zero changed predictions in 270 samples
does not prove the drop is zero). It is a closed form, so every report of a run gives the same
interval.

`resolution` answers, before any search, whether the test split can tell the allowed drop from no
drop at all: the interval's half-width when the drop is exactly the allowed one, in the case
kindest to the split (every changed prediction a loss; any gains widen it).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist
from typing import Any

import torch

CONFIDENCE = 0.95  # two-sided, for every interval a report prints


@dataclass(frozen=True)
class DropInterval:
    drop: float  # points: (lost - gained) / samples, what the deployment rule compares with the limit
    low: float  # points, the interval's lower end
    high: float  # points, its upper end
    lost: int  # test samples the dense model got right and the pruned model wrong
    gained: int  # test samples the pruned model got right and the dense model wrong
    samples: int
    confidence: float = CONFIDENCE

    @property
    def half_width(self) -> float:
        return (self.high - self.low) / 2.0

    def within(self, limit: float) -> float:
        """How sure the true drop is at most `limit` points: the level of the one-sided interval
        whose upper end is `limit`, on the same adjusted normal approximation."""
        center, se = _adjusted(self.lost, self.gained, self.samples)
        if se == 0.0:
            return 1.0 if center <= limit / 100.0 else 0.0
        return NormalDist().cdf((limit / 100.0 - center) / se)

    def text(self) -> str:
        """'1.48 points (95 % interval -0.37 to 3.33; 6 lost, 2 gained of 270)'."""
        return (
            f"{self.drop:.2f} points ({self.confidence:.0%} interval {self.low:.2f} to {self.high:.2f};"
            f" {self.lost} lost, {self.gained} gained of {self.samples})"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "accuracy_drop": self.drop,
            "accuracy_drop_low": self.low,
            "accuracy_drop_high": self.high,
            "accuracy_drop_confidence": self.confidence,
            "test_samples_lost": self.lost,
            "test_samples_gained": self.gained,
        }


def _adjusted(lost: int, gained: int, samples: int) -> tuple[float, float]:
    """Bonett-Price: the adjusted difference (a fraction) and its standard error."""
    n = samples + 2
    p_lost, p_gained = (lost + 1) / n, (gained + 1) / n
    center = p_lost - p_gained
    return center, math.sqrt(max(p_lost + p_gained - center**2, 0.0) / n)


def drop_interval(lost: int, gained: int, samples: int, confidence: float = CONFIDENCE) -> DropInterval:
    """The paired interval from the discordant counts; every figure in accuracy points."""
    if samples < 1 or lost < 0 or gained < 0 or lost + gained > samples:
        raise ValueError(f"impossible counts: {lost} lost and {gained} gained of {samples} samples")
    z = NormalDist().inv_cdf(0.5 + confidence / 2.0)
    center, se = _adjusted(lost, gained, samples)
    low, high = max(center - z * se, -1.0), min(center + z * se, 1.0)
    return DropInterval(100.0 * (lost - gained) / samples, 100.0 * low, 100.0 * high, lost, gained, samples, confidence)


def paired_drop(dense_right: torch.Tensor, pruned_right: torch.Tensor, confidence: float = CONFIDENCE) -> DropInterval:
    """The drop and its interval from each test sample scored by both models (bool tensors, one
    entry per sample, in the same order)."""
    if dense_right.shape != pruned_right.shape or dense_right.ndim != 1:
        raise ValueError("the two models must be scored on the same samples")
    lost = int((dense_right & ~pruned_right).sum())
    gained = int((~dense_right & pruned_right).sum())
    return drop_interval(lost, gained, int(dense_right.numel()), confidence)


@dataclass(frozen=True)
class Resolution:
    """Whether `samples` test samples resolve a drop of `limit` points."""

    samples: int
    limit: float  # points
    half_width: float  # points, at a drop of exactly `limit` with no gains
    samples_needed: int  # the fewest test samples whose half-width there is within the limit

    @property
    def resolved(self) -> bool:
        return self.half_width <= self.limit

    def warning(self) -> str:
        return (
            f"the test split is too small to resolve a {self.limit:g}-point drop: on {self.samples} test samples"
            f" a {self.limit:g}-point drop has a {CONFIDENCE:.0%} interval of ±{self.half_width:.2f} points"
            f" even if every changed prediction is a loss; about {self.samples_needed} would resolve it (going on)"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "test_samples": self.samples,
            "max_accuracy_drop": self.limit,
            "half_width_at_limit": self.half_width,
            "samples_needed": self.samples_needed,
            "resolved": self.resolved,
        }


def _half_width_at(limit: float, samples: int) -> float:
    return drop_interval(min(round(limit / 100.0 * samples), samples), 0, samples).half_width


def resolution(samples: int, limit: float) -> Resolution | None:
    """The test split's resolution at the allowed drop; None for a limit of 0 (no split resolves
    it: one lost sample is over the limit) or of 100 points and more (nothing to resolve)."""
    if not 0.0 < limit < 100.0:
        return None
    lo, hi = 1, max(samples, 1)
    while _half_width_at(limit, hi) > limit:  # doubling, then bisection: the half-width falls as samples grow
        lo, hi = hi, hi * 2
    while lo < hi:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if _half_width_at(limit, mid) <= limit else (mid + 1, hi)
    return Resolution(samples, limit, _half_width_at(limit, samples), hi)
