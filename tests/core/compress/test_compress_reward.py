"""The patent's reward: accuracy against the threshold and the target cycle reduction."""
from __future__ import annotations

import pytest

from trainpilot.compress.reward import compression_reward


def test_both_thresholds_met_beats_either_alone() -> None:
    both = compression_reward(0.95, 0.94, 1.6, 1.5)
    slow = compression_reward(0.95, 0.94, 1.2, 1.5)
    inaccurate = compression_reward(0.90, 0.94, 1.6, 1.5)
    assert both.both_met and not slow.both_met and not inaccurate.both_met
    assert both.value > slow.value and both.value > inaccurate.value
    assert slow.accuracy_met and not slow.speed_met
    assert inaccurate.speed_met and not inaccurate.accuracy_met


def test_past_the_target_only_accuracy_counts() -> None:
    assert compression_reward(0.95, 0.94, 3.0, 1.5).value == pytest.approx(compression_reward(0.95, 0.94, 1.5, 1.5).value)
    assert compression_reward(0.96, 0.94, 1.6, 1.5).value > compression_reward(0.95, 0.94, 2.5, 1.5).value


def test_short_of_the_target_every_bit_of_speed_counts() -> None:
    values = [compression_reward(0.9, 0.9, s, 2.0).value for s in (1.0, 1.4, 1.8, 2.0)]
    assert values == sorted(values) and len(set(values)) == 4


def test_an_impossible_target_is_refused() -> None:
    with pytest.raises(ValueError):
        compression_reward(0.9, 0.9, 1.0, 1.0)
