"""An 80 % interval around every predicted time, from how far this kind of prediction has missed.

A user plans around "2.0 s"; the honest figure is "2.0 s (1.8-2.3)". The interval comes from the
measured error of past predictions of the same *kind*:

  cold  the workload had no run of its own on this plan and load state (the roofline, perhaps
        corrected by similar workloads): large errors are usual
        (measured: docs/measurements.md#five-full-runs-of-the-final-code);
  warm  its own runs corrected the roofline: what remains is mostly the machine's noise.

For each kind, the weighted empirical 10th and 90th percentiles of ln(actual / predicted) over
the predictions TrainPilot made before past runs, weighted by how alike their load state is (a
busy core makes timings much noisier) and by recency, together with a prior: PRIOR_RUNS pseudo
runs spread as a log-normal error of the kind's prior spread, so a thin history gives a sensible
interval and a long one its own. Empirical quantiles rather than +-1.28 sigma, because timing
errors on a shared machine are skewed (a run that met a burst is slow, never fast).

The warm prior is this machine's measured repeat noise: the spread of the same workload run again
on the same plan in a similar load state (`repeat_noise`), as a new run's spread around the mean of
the n earlier ones. A fixed warm prior of 12 % covered too few warm runs on a 2-core VM whose runs
vary much from one to the next, and too many idle warm runs on quieter days when warm runs missed
by little (six decisions-benchmark histories; measured: docs/prediction.md#intervals), so it is
measured, not assumed; it also floors every warm interval, since no amount of learning removes it.
The noise is a robust (median-based) spread: run times on a shared machine are heavy-tailed (some
runs meet a burst), and in the busy state the warm errors' standard deviation came out well above
their median-based spread (docs/prediction.md#intervals), which widened every warm interval past
what it needed.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist, median

from trainpilot.plans import Plan
from trainpilot.predict.learning import Observation, plan_match

LEVEL = 0.80  # the interval's nominal coverage
PRIOR_RUNS = 4.0  # pseudo-runs of the prior that measured errors have to outweigh
PRIOR_POINTS = 16  # how finely the prior's log-normal is laid out
MIN_COLD_SIGMA = 0.15  # a roofline is never trusted closer than this before it has met the workload
STATE_SCALE = 0.25  # load-state distance at which a past error counts e^-1 as much (as learning.py)
DECAY = 0.995  # per newer run: older errors were made by a model that has learnt since
SAME_STATE = 0.2  # busy-weight distance within which an earlier run of the workload made it warm
# Each kind's interval counts only its own kind's errors. Cold errors once stood in for the
# machine's noise behind a warm prediction with few warm errors; the measured repeat noise is
# that prior now, and mixing the cold errors in at a third of a run each kept idle warm intervals
# far wider than warm runs missed (benchmarks/decisions.py; measured: docs/prediction.md#intervals).

# The repeat-noise estimate's prior: NOISE_PRIOR_DOF pseudo degrees of freedom of this spread in
# ln(time). A repeat (two runs of one workload and plan) adds one degree of freedom, so a handful
# of repeats outweigh the prior.
NOISE_PRIOR_SIGMA = 0.15
NOISE_PRIOR_DOF = 4.0
MAD_TO_SIGMA = 1.0 / NormalDist().inv_cdf(0.75)  # a normal's sigma over its median absolute deviation

COLD, WARM = "cold", "warm"


@dataclass(frozen=True)
class Interval:
    low_s: float
    high_s: float
    kind: str  # cold | warm
    runs: float  # measured errors behind it (effective count; the prior adds PRIOR_RUNS)

    def to_dict(self) -> dict[str, float | str]:
        return {
            "low_s": self.low_s,
            "high_s": self.high_s,
            "kind": self.kind,
            "runs": round(self.runs, 1),
            "level": LEVEL,
        }


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
        key = (
            rec.footprint,
            (rec.plan.backend, rec.plan.threads, rec.plan.mode, rec.plan.device, rec.plan.settings_key),
        )
        earlier = seen.setdefault(key, [])
        if o.log_error is not None:
            warm = any(abs(o.busy_weight - w) <= SAME_STATE for w in earlier)
            out.append(ErrorSample(WARM if warm else COLD, o.busy_weight, o.log_error))
        earlier.append(o.busy_weight)
    out.reverse()
    return out


def repeat_noise(observations: Sequence[Observation], busy_weight: float) -> tuple[float, float]:
    """(sigma of ln(time) between repeats of the same workload and plan, degrees of freedom behind
    it) near `busy_weight`. Within one footprint and plan the roofline is the same, so the spread
    of ln(actual / roofline) there is the run-to-run noise. Groups also split by load state (busy
    weight within SAME_STATE), each weighted by how alike its load state is to `busy_weight`.

    Robust: each run's deviation from its group's median, scaled to one run's noise (a group of k
    runs spreads around its own centre by about sigma * sqrt((k - 1) / k)), and sigma from the weighted
    median of those deviations (MAD_TO_SIGMA), so a run that met a burst counts as one deviation,
    not as its square. The NOISE_PRIOR_* prior is laid out as NOISE_PRIOR_DOF pseudo deviations."""
    groups: dict[tuple[object, ...], list[tuple[float, float]]] = {}
    for o in observations:
        rec = o.record
        key = (
            rec.footprint,
            rec.plan.backend,
            rec.plan.threads,
            rec.plan.mode,
            rec.plan.device,
            rec.plan.settings_key,
            round(o.busy_weight / SAME_STATE),
        )
        groups.setdefault(key, []).append((o.log_ratio, o.busy_weight))
    half_normal = NormalDist()
    deviations = [
        (NOISE_PRIOR_SIGMA * half_normal.inv_cdf(0.5 + (i + 0.5) / (2 * PRIOR_POINTS)), NOISE_PRIOR_DOF / PRIOR_POINTS)
        for i in range(PRIOR_POINTS)
    ]
    dof = 0.0
    for members in groups.values():
        k = len(members)
        if k < 2:
            continue
        w = math.exp(-(((busy_weight - sum(b for _, b in members) / k) / STATE_SCALE) ** 2))
        if w < 1e-3:
            continue
        centre = median(r for r, _ in members)
        scale = math.sqrt(k / (k - 1))
        deviations += [(abs(r - centre) * scale, w * (k - 1) / k) for r, _ in members]
        dof += w * (k - 1)
    return weighted_quantile(deviations, 0.5) * MAD_TO_SIGMA, dof


def noise_floor(bounds: tuple[float, float, float], sigma: float, runs_behind: int) -> tuple[float, float, float]:
    """Widen a warm prediction's (ln low, ln high, runs) to at least the central LEVEL of a new
    run's spread around the mean of its `runs_behind` earlier runs: sigma * sqrt(1 + 1/n), the warm
    prior's own spread, which the measured errors may widen but not narrow. A cold one is left as
    it is: its prior (2.5x the calibration's fit residual) already holds the noise; flooring it too
    made the intervals cover too many runs in a replay of three decisions-benchmark histories,
    which the warm floor alone did not (measured: docs/measurements.md#cited-in-the-code-prediction)."""
    lo, hi, runs = bounds
    if runs_behind < 1:
        return bounds
    spread = sigma * math.sqrt(1.0 + 1.0 / runs_behind)
    z = NormalDist().inv_cdf(0.5 + LEVEL / 2)
    return min(lo, -z * spread), max(hi, z * spread), runs


def runs_behind(observations: Sequence[Observation], footprint: str, plan: Plan, busy_weight: float) -> int:
    """Earlier runs of this workload on this plan in a similar load state: a prediction with any
    is warm."""
    return sum(
        1
        for o in observations
        if o.record.footprint == footprint
        and plan_match(plan, o.record.plan) == 1.0
        and abs(o.busy_weight - busy_weight) <= SAME_STATE
    )


def prior_sigma(kind: str, fit_error: float, noise_sigma: float = NOISE_PRIOR_SIGMA, runs_behind: int = 1) -> float:
    """The spread a prediction of `kind` has before errors of its kind are measured. Warm: a new
    run's spread around the mean of its `runs_behind` earlier runs, from the machine's repeat noise."""
    if kind == WARM:
        return noise_sigma * math.sqrt(1.0 + 1.0 / max(runs_behind, 1))
    return max(2.5 * fit_error, MIN_COLD_SIGMA)  # cold errors run a few times the fit residual: docs/measurements.md


def log_bounds(
    samples: Sequence[ErrorSample], kind: str, busy_weight: float, sigma: float
) -> tuple[float, float, float]:
    """(ln low factor, ln high factor, measured runs behind them) for a prediction of `kind`."""
    points: list[tuple[float, float]] = []
    normal = NormalDist()
    for i in range(PRIOR_POINTS):
        points.append((sigma * normal.inv_cdf((i + 0.5) / PRIOR_POINTS), PRIOR_RUNS / PRIOR_POINTS))
    weight = 1.0
    measured = 0.0
    for s in samples:  # newest first
        weight *= DECAY
        if s.kind != kind:
            continue
        w = weight * math.exp(-(((busy_weight - s.busy_weight) / STATE_SCALE) ** 2))
        if w < 1e-3:
            continue
        points.append((s.log_error, w))
        measured += w
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


def interval(
    predicted_s: float,
    samples: Sequence[ErrorSample],
    kind: str,
    busy_weight: float,
    fit_error: float,
    noise_sigma: float = NOISE_PRIOR_SIGMA,
    runs_behind: int = 1,
) -> Interval:
    sigma = prior_sigma(kind, fit_error, noise_sigma, runs_behind)
    return around(
        predicted_s,
        noise_floor(log_bounds(samples, kind, busy_weight, sigma), noise_sigma, runs_behind if kind == WARM else 0),
        kind,
    )


def around(predicted_s: float, bounds: tuple[float, float, float], kind: str) -> Interval:
    lo, hi, runs = bounds
    lo, hi = min(lo, 0.0), max(hi, 0.0)  # the prediction itself is always inside its interval
    return Interval(predicted_s * math.exp(lo), predicted_s * math.exp(hi), kind, runs)


def scaled(
    bounds: dict[str, float] | None, predicted_s: float | None, value_s: float | None
) -> tuple[float | None, float | None]:
    """The same relative interval around another time derived from the prediction (an epoch's
    share, the remaining time, an ETA): (low, high), or (None, None) when there is none."""
    if not bounds or not predicted_s or value_s is None or predicted_s <= 0:
        return None, None
    return value_s * bounds["low_s"] / predicted_s, value_s * bounds["high_s"] / predicted_s
