"""An 80 % interval around every predicted time, from how far this kind of prediction has missed.

A user plans around "2.0 s"; the honest figure is "2.0 s (1.8-2.3)". The interval comes from the
measured error of past predictions of the same *kind*:

  cold  the workload had no run of its own on this plan and load state (the roofline, perhaps
        corrected by similar workloads): errors of 20-30 % are usual;
  warm  its own runs corrected the roofline: what remains is mostly the machine's noise.

For each kind, the weighted empirical 10th and 90th percentiles of ln(actual / predicted) over
the predictions TrainPilot made before past runs, weighted by how alike their load state is (a
busy core makes timings much noisier) and by recency, together with a prior: PRIOR_RUNS pseudo
runs spread as a log-normal error of the kind's prior spread, so a thin history gives a sensible
interval and a long one its own. Empirical quantiles rather than +-1.28 sigma, because timing
errors on a shared machine are skewed (a run that met a burst is slow, never fast).

No interval is narrower than the machine's repeat noise: the spread of the same workload run
again on the same plan in a similar load state (`repeat_noise`), which no amount of learning
removes. A fixed warm prior of 12 % covered 69 % of warm runs on a 2-core VM whose runs vary
~25 % from one to the next (benchmarks/decisions.py), so the floor is measured, not assumed.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist
from typing import Sequence

from .learning import Observation, plan_match

LEVEL = 0.80  # the interval's nominal coverage
PRIOR_RUNS = 4.0  # pseudo-runs of the prior that measured errors have to outweigh
PRIOR_POINTS = 16  # how finely the prior's log-normal is laid out
WARM_PRIOR_SIGMA = 0.12  # run-to-run variation on this kind of machine (decisions benchmark: 10-14 %)
MIN_COLD_SIGMA = 0.15  # a roofline is never trusted closer than this before it has met the workload
STATE_SCALE = 0.25  # load-state distance at which a past error counts e^-1 as much (as learning.py)
DECAY = 0.995  # per newer run: older errors were made by a model that has learnt since
SAME_STATE = 0.2  # busy-weight distance within which an earlier run of the workload made it warm
# The other kind's measured errors count this much each: a warm prediction with few warm errors
# behind it is no better than the machine's noise, which the cold errors measured too (a fixed
# warm prior of 12 % covered 61 % of warm runs on a noisy 2-core VM, benchmarks/decisions.py).
OTHER_KIND_WEIGHT = 0.3

# The repeat-noise estimate's prior: NOISE_PRIOR_DOF pseudo degrees of freedom of this spread in
# ln(time). A repeat (two runs of one workload and plan) adds one degree of freedom, so a handful
# of repeats outweigh the prior.
NOISE_PRIOR_SIGMA = 0.15
NOISE_PRIOR_DOF = 4.0

COLD, WARM = "cold", "warm"


@dataclass(frozen=True)
class Interval:
    low_s: float
    high_s: float
    kind: str  # cold | warm
    runs: float  # measured errors behind it (effective count; the prior adds PRIOR_RUNS)

    def to_dict(self) -> dict[str, float | str]:
        return {"low_s": self.low_s, "high_s": self.high_s, "kind": self.kind, "runs": round(self.runs, 1), "level": LEVEL}


@dataclass(frozen=True)
class ErrorSample:
    kind: str
    busy_weight: float
    log_error: float  # ln(actual / predicted then)


def error_samples(observations: Sequence[Observation]) -> list[ErrorSample]:
    """The past predictions' errors with their kind, newest first. A prediction was warm when an
    earlier run of the same workload on the same plan, in a similar load state, existed."""
    seen: dict[tuple[str, object], list[float]] = {}
    out: list[ErrorSample] = []
    for o in reversed(observations):  # oldest first: what existed before each run
        rec = o.record
        key = (rec.footprint, (rec.plan.backend, rec.plan.threads, rec.plan.mode, rec.plan.device))
        earlier = seen.setdefault(key, [])
        if o.log_error is not None:
            warm = any(abs(o.busy_weight - w) <= SAME_STATE for w in earlier)
            out.append(ErrorSample(WARM if warm else COLD, o.busy_weight, o.log_error))
        earlier.append(o.busy_weight)
    out.reverse()
    return out


def repeat_noise(observations: Sequence[Observation], busy_weight: float) -> tuple[float, float]:
    """(sigma of ln(time) between repeats of the same workload and plan, degrees of freedom behind
    it) near `busy_weight`. Pooled within-group variance of ln(actual / roofline): within one
    footprint and plan the roofline is the same, so what is left is the run-to-run noise. Groups
    also split by load state (busy weight within SAME_STATE), each weighted by how alike its load
    state is to `busy_weight`, with the NOISE_PRIOR_* prior."""
    groups: dict[tuple[object, ...], list[tuple[float, float]]] = {}
    for o in observations:
        rec = o.record
        key = (rec.footprint, rec.plan.backend, rec.plan.threads, rec.plan.mode, rec.plan.device, round(o.busy_weight / SAME_STATE))
        groups.setdefault(key, []).append((o.log_ratio, o.busy_weight))
    ss = NOISE_PRIOR_DOF * NOISE_PRIOR_SIGMA ** 2
    dof = 0.0
    for members in groups.values():
        ratios, weights = [r for r, _ in members], [b for _, b in members]
        if len(ratios) < 2:
            continue
        w = math.exp(-(((busy_weight - sum(weights) / len(weights)) / STATE_SCALE) ** 2))
        mean = sum(ratios) / len(ratios)
        ss += w * sum((r - mean) ** 2 for r in ratios)
        dof += w * (len(ratios) - 1)
    return math.sqrt(ss / (NOISE_PRIOR_DOF + dof)), dof


def noise_floor(bounds: tuple[float, float, float], sigma: float, runs_behind: int) -> tuple[float, float, float]:
    """Widen a warm prediction's (ln low, ln high, runs) to at least the central LEVEL of a new
    run's spread around the mean of its `runs_behind` earlier runs: sigma * sqrt(1 + 1/n). A cold
    one is left as it is: its prior (2.5x the calibration's fit residual) already holds the noise;
    flooring it too covered 83-88 % of runs in a replay of three decisions-benchmark histories,
    against 76-83 % with the warm floor alone."""
    lo, hi, runs = bounds
    if runs_behind < 1:
        return bounds
    spread = sigma * math.sqrt(1.0 + 1.0 / runs_behind)
    z = NormalDist().inv_cdf(0.5 + LEVEL / 2)
    return min(lo, -z * spread), max(hi, z * spread), runs


def runs_behind(observations: Sequence[Observation], footprint: str, plan: object, busy_weight: float) -> int:
    """Earlier runs of this workload on this plan in a similar load state: a prediction with any
    is warm."""
    return sum(1 for o in observations if o.record.footprint == footprint and plan_match(plan, o.record.plan) == 1.0  # type: ignore[arg-type]
               and abs(o.busy_weight - busy_weight) <= SAME_STATE)


def prior_sigma(kind: str, fit_error: float) -> float:
    if kind == WARM:
        return WARM_PRIOR_SIGMA
    return max(2.5 * fit_error, MIN_COLD_SIGMA)  # cold errors run ~2-3x the calibration's fit residual


def log_bounds(samples: Sequence[ErrorSample], kind: str, busy_weight: float, sigma: float) -> tuple[float, float, float]:
    """(ln low factor, ln high factor, measured runs behind them) for a prediction of `kind`."""
    points: list[tuple[float, float]] = []
    normal = NormalDist()
    for i in range(PRIOR_POINTS):
        points.append((sigma * normal.inv_cdf((i + 0.5) / PRIOR_POINTS), PRIOR_RUNS / PRIOR_POINTS))
    weight = 1.0
    measured = 0.0
    for s in samples:  # newest first
        weight *= DECAY
        w = weight * math.exp(-(((busy_weight - s.busy_weight) / STATE_SCALE) ** 2))
        if s.kind != kind:
            w *= OTHER_KIND_WEIGHT
        if w < 1e-3:
            continue
        points.append((s.log_error, w))
        measured += w if s.kind == kind else 0.0
    tail = (1.0 - LEVEL) / 2
    return weighted_quantile(points, tail), weighted_quantile(points, 1.0 - tail), measured


def weighted_quantile(points: list[tuple[float, float]], q: float) -> float:
    """The q-quantile of weighted values, interpolated between the midpoints of their weights."""
    ordered = sorted(points)
    total = sum(w for _, w in ordered)
    target = q * total
    acc = 0.0
    prev_mid, prev_v = None, ordered[0][0]
    for v, w in ordered:
        mid = acc + w / 2
        if mid >= target:
            if prev_mid is None:
                return v
            t = (target - prev_mid) / (mid - prev_mid) if mid > prev_mid else 1.0
            return prev_v + t * (v - prev_v)
        prev_mid, prev_v = mid, v
        acc += w
    return ordered[-1][0]


def interval(predicted_s: float, samples: Sequence[ErrorSample], kind: str, busy_weight: float, fit_error: float) -> Interval:
    return around(predicted_s, log_bounds(samples, kind, busy_weight, prior_sigma(kind, fit_error)), kind)


def around(predicted_s: float, bounds: tuple[float, float, float], kind: str) -> Interval:
    lo, hi, runs = bounds
    lo, hi = min(lo, 0.0), max(hi, 0.0)  # the prediction itself is always inside its interval
    return Interval(predicted_s * math.exp(lo), predicted_s * math.exp(hi), kind, runs)


def scaled(bounds: dict[str, float] | None, predicted_s: float | None, value_s: float | None) -> tuple[float | None, float | None]:
    """The same relative interval around another time derived from the prediction (an epoch's
    share, the remaining time, an ETA): (low, high), or (None, None) when there is none."""
    if not bounds or not predicted_s or value_s is None or predicted_s <= 0:
        return None, None
    return value_s * bounds["low_s"] / predicted_s, value_s * bounds["high_s"] / predicted_s
