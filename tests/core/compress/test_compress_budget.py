"""The compression job's training budget: by default 48 epochs but at least DENSE_MIN_SAMPLES samples
seen (2400 steps at batch 64) for the dense model, half of its steps for the deployment fine-tune,
and explicit epochs as given."""
from __future__ import annotations

import pytest

from trainpilot.compress import CompressConfig
from trainpilot.compress.budget import DENSE_MIN_SAMPLES, budget_for

DENSE_MIN_STEPS = DENSE_MIN_SAMPLES // 64  # at the default batch


def test_a_small_set_gets_the_floor_in_steps_and_half_of_it_to_fine_tune() -> None:
    budget = budget_for(1258, 64)  # scikit-learn's digits after the held-out splits: 48 epochs are 944 steps
    assert budget.dense_steps == DENSE_MIN_STEPS and budget.deploy_steps == DENSE_MIN_STEPS // 2
    assert budget.why == f"48 epochs are only 944 steps here; {DENSE_MIN_STEPS} is the least"
    assert budget.to_dict()["dense_epochs"] == pytest.approx(DENSE_MIN_STEPS * 64 / 1258, abs=0.01)


def test_a_large_set_gets_its_48_epochs() -> None:
    budget = budget_for(3360, 64)  # the 4800-sample demo set: 48 epochs are 2520 steps, above the floor
    assert (budget.dense_steps, budget.deploy_steps) == (2520, 1260) and budget.why == "48 epochs"


def test_epochs_given_are_taken_as_given_even_below_the_floor() -> None:
    budget = budget_for(1258, 64, dense_epochs=2, deploy_epochs=0.5)
    assert (budget.dense_steps, budget.deploy_steps) == (39, 10) and budget.why == "2 epochs, as given"
    assert budget_for(1258, 64, deploy_epochs=1).dense_steps == DENSE_MIN_STEPS  # each default stands alone


def test_a_non_positive_epoch_count_is_a_usage_error() -> None:
    assert CompressConfig().problems() == []
    for bad in ({"dense_epochs": 0}, {"deploy_epochs": -1.0}):
        assert any("must be positive" in p for p in CompressConfig(**bad).problems())


def test_another_batch_keeps_the_samples_seen_and_a_batch_above_the_set_is_the_whole_set() -> None:
    assert budget_for(1258, 512).dense_steps == DENSE_MIN_SAMPLES // 512  # 300 steps, not 2400 steps of 512
    whole = budget_for(40, 64)  # every step sees all 40 samples: 48 epochs are 48 steps
    assert whole.to_dict()["dense_epochs"] == whole.dense_steps and whole.dense_steps == DENSE_MIN_SAMPLES // 40
    assert budget_for(40, 64, dense_epochs=48).dense_steps == 48
