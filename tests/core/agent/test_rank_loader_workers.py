"""A Dataset job's DataLoader workers per rank (agent/loader_plans.rank_loader_workers): predicted on
the rank's own cores and share, next to the other ranks' load."""
from __future__ import annotations

from dataclasses import replace

import pytest

from trainpilot.agent.loader_plans import rank_loader_workers
from trainpilot.agent.planning import profile_job
from trainpilot.plans import Plan


@pytest.fixture(scope="module")
def profile():
    found, _data = profile_job("mlp", None, epochs=1, batch_size=64)
    return found


def loading(profile, load_s: float = 0.05):
    """The profile of a job whose batches cost `load_s` to load in one process (a Dataset)."""
    return replace(profile, loader="workers", load_s_per_batch=load_s)


def test_data_in_memory_takes_no_workers_and_pinned_workers_are_kept(profile, calibrated_model):
    rank = Plan("cpu", threads=1)
    assert rank_loader_workers(profile, rank, 2, 1.0, calibrated_model.calibration, 2) is None
    pinned = replace(profile, loader="pinned", pinned_workers=3)
    assert rank_loader_workers(pinned, rank, 2, 1.0, calibrated_model.calibration, None) == 3


def test_without_a_calibration_the_single_process_choice_is_shared_out(profile):
    assert rank_loader_workers(loading(profile), Plan("cpu", threads=1), 2, 1.0, None, 2) == 1
    assert rank_loader_workers(loading(profile), Plan("cpu", threads=1), 2, 1.0, None, 1) is None


def test_a_worker_pays_only_where_the_rank_has_a_core_to_spare(profile, calibrated_model):
    """Slow loading: beside another rank's busy core a worker would share the rank's one core with
    its compute (no overlap, plus the hand-off); alone on the machine, the free core hides it."""
    cal = calibrated_model.calibration
    if cal.logical_cpus < 2:
        pytest.skip("needs 2 cores")
    slow = loading(profile, 0.05)
    crowded = rank_loader_workers(slow, Plan("cpu", threads=1), 2, float(cal.logical_cpus - 1), cal, None)
    alone = rank_loader_workers(slow, Plan("cpu", threads=1), 2, 0.0, cal, None)
    assert crowded is None and alone == 1
