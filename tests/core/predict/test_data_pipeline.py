"""The data pipeline's step with DataLoader workers: compute under the workers' own load."""
from __future__ import annotations

import pytest

from trainpilot.plans import Plan
from trainpilot.predict.data_pipeline import _under_workers, pipeline


def steep(busy: float) -> float:
    """A compute step very sensitive to load, as a 2-thread step on 2 cores is (seconds)."""
    return 0.0128 * (1.0 + 0.8 * busy + 3.5 * max(busy - 1.0, 0.0) ** 2 * 4)


def test_the_step_under_the_workers_load_is_the_fixed_point():
    c = _under_workers(steep, steep(0.0), 0.016, 2, 0.0, 2.0)
    cores = min(2.0, 0.016 / max(c, 0.008))
    assert steep(cores) == pytest.approx(c, rel=1e-3)


@pytest.mark.parametrize("workers", [1, 2])
def test_a_faster_compute_step_is_never_predicted_slower_with_the_same_workers(workers):
    """channels_last makes a step 0.7x; its plan with loader workers once came out 2x slower than
    the NCHW one, because the iteration oscillated and stopped on a high value."""
    plan = Plan("cpu", threads=2, loader_workers=workers)
    slow = pipeline(steep, 0.016, plan, 0.0, 2)
    fast = pipeline(lambda busy: 0.7 * steep(busy), 0.016, plan, 0.0, 2)
    assert fast.step_s <= slow.step_s
