"""Machine drift: how much faster or slower than usual this machine has run in the last minutes.

A shared or thermally limited machine does not keep one speed: on the 2-core VM this was built
on, every workload and plan of a benchmark pass ran slower or faster together than in the pass
before (`benchmarks/decisions.py`; measured: docs/measurements.md#cited-in-the-code-prediction). The
per-workload correction (`learning.correction`) averages over all of a workload's past runs, so it
cannot follow such a shift; the runs just finished can.

A *residual* is how far a run's actual time was from the drift-free warm prediction made from the
history before it: ln(actual / (roofline x correction)). Only runs whose own workload had history
count (`exact_runs >= 1`): the residual of a never-seen workload is mostly the roofline's error
for that workload, not the machine's mood, and letting it in made unseen workloads worse (tried on
three recorded benchmark histories: pass-1 error rose with it, did not move without it).
The drift now is the weighted median of recent residuals, weighted by exp(-age / DRIFT_TAU_S) and
by how alike their load state is, with DRIFT_PRIOR pseudo-runs at 0. A median, not a mean: a shift
of the whole machine moves most residuals, while one plan whose own times swing wildly moves only
its own. Two threads next to a busy core on 2 cores swung wildly for one short job from one pass
to the next; with a mean, those residuals pulled every plan's prediction in that load state with
them (measured: docs/prediction.md#cold-and-warm-predictions-drift-confidence). Replaying seven
recorded decisions-benchmark histories (benchmarks/replay_decisions.py), warm MAPE missed the
oracle + 1 point in most of them before and in none with the median (measured:
docs/measurements.md#what-replaying-the-histories-found).
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass

from trainpilot.predict.interval import weighted_quantile
from trainpilot.predict.learning import Observation, correction

DRIFT_TAU_S = 60.0  # a residual's weight falls by e every minute
DRIFT_PRIOR = 3.0  # pseudo-runs at "no drift": n fresh runs that agree pull the median n/4 of the way, 4 all of it
DRIFT_MAX_RUNS = 12  # the newest residuals kept (older ones weigh ~nothing anyway)
DRIFT_HORIZON_S = 5 * DRIFT_TAU_S  # residuals older than this are not even computed
STATE_SCALE = 0.25  # load-state distance (busy weights) at which a residual counts e^-1 as much


@dataclass(frozen=True)
class Residual:
    at: float  # when the run was recorded (epoch seconds)
    busy_weight: float  # the load state it ran in (learning.state_weight)
    log_residual: float  # ln(actual / drift-free warm prediction)


@dataclass(frozen=True)
class Drift:
    log_factor: float
    weight: float  # effective fresh runs behind it
    runs: int

    @property
    def factor(self) -> float:
        return math.exp(self.log_factor)


NO_DRIFT = Drift(0.0, 0.0, 0)


def residual_of(new: Observation, older: Sequence[Observation]) -> Residual | None:
    """The residual of `new` against the warm prediction `older` (newest first) would have made;
    None when its workload had no history of its own then."""
    rec = new.record
    corr = correction(list(older), rec.footprint, new.features, rec.plan, new.busy_weight)
    if corr.exact_runs < 1:
        return None
    return Residual(rec.recorded_at, new.busy_weight, new.log_ratio - corr.log_factor)


def recent_residuals(observations: Sequence[Observation], now: float | None = None) -> list[Residual]:
    """Residuals of the newest observations (newest first), within the horizon. Computed when the
    history is read: at most DRIFT_MAX_RUNS corrections, each over the runs before it."""
    now = time.time() if now is None else now
    out: list[Residual] = []
    for i, obs in enumerate(observations):
        if len(out) >= DRIFT_MAX_RUNS or now - obs.record.recorded_at > DRIFT_HORIZON_S:
            break
        found = residual_of(obs, observations[i + 1 :])
        if found is not None:
            out.append(found)
    return out


def drift(residuals: Sequence[Residual], busy_weight: float, now: float | None = None) -> Drift:
    now = time.time() if now is None else now
    points = [(0.0, DRIFT_PRIOR)]
    den = 0.0
    runs = 0
    for r in residuals:
        w = math.exp(-max(now - r.at, 0.0) / DRIFT_TAU_S) * math.exp(
            -(((busy_weight - r.busy_weight) / STATE_SCALE) ** 2)
        )
        if w < 1e-3:
            continue
        points.append((r.log_residual, w))
        den += w
        runs += 1
    if runs == 0:
        return NO_DRIFT
    return Drift(weighted_quantile(points, 0.5), den, runs)
