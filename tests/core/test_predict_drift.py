"""Machine drift (predict/drift.py): recent misses of warm predictions shift the next prediction;
old ones, misses from another load state, and misses of never-seen workloads do not."""
from __future__ import annotations

import math
import time

import pytest

from trainpilot.predict.drift import DRIFT_PRIOR, DRIFT_TAU_S, NO_DRIFT, Residual, drift


def test_no_residuals_no_drift() -> None:
    assert drift([], 0.0) == NO_DRIFT
    assert NO_DRIFT.factor == 1.0


def test_fresh_residuals_pull_towards_their_mean_shrunk_by_the_prior() -> None:
    now = time.time()
    slow = [Residual(now, 0.0, math.log(1.2)) for _ in range(6)]
    d = drift(slow, 0.0, now)
    assert d.runs == 6
    assert d.log_factor == pytest.approx(math.log(1.2) * 6 / (6 + DRIFT_PRIOR))
    assert 1.0 < d.factor < 1.2


def test_old_residuals_fade() -> None:
    now = time.time()
    fresh = drift([Residual(now, 0.0, 0.3)], 0.0, now).log_factor
    minute = drift([Residual(now - DRIFT_TAU_S, 0.0, 0.3)], 0.0, now).log_factor
    ancient = drift([Residual(now - 20 * DRIFT_TAU_S, 0.0, 0.3)], 0.0, now)
    assert fresh > minute > 0
    assert ancient == NO_DRIFT


def test_another_load_state_says_little() -> None:
    now = time.time()
    busy_runs = [Residual(now, 1.0, 0.3)] * 4
    assert drift(busy_runs, 1.0, now).log_factor > 0.1
    assert drift(busy_runs, 0.0, now) == NO_DRIFT
