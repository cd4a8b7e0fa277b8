"""The rounds a speed-up is timed for (speedup_repeats.py): more until the interval decides against
the threshold, within a budget of rounds and seconds. Constructed rounds and a constructed clock:
nothing waits."""
from __future__ import annotations

import itertools
import math

import pytest

from trainpilot.compress.speedup_interval import speedup_interval
from trainpilot.compress.speedup_repeats import TimingBudget, rounds_until_decided


def rounds(ratio: float, spread: float):
    """Endless paired rounds at `ratio`, the pruned step's noise cycling through +/- `spread`
    (in 7 steps, so every stretch of rounds holds the same spread)."""
    for i in itertools.count():
        factor = 1.0 + spread * math.sin(2 * math.pi * i / 7)
        yield {"dense": 1.0, "pruned": factor / ratio}


class Clock:
    """Advances `per_call` seconds each time it is read."""

    def __init__(self, per_call: float):
        self.now, self.per_call = 0.0, per_call

    def __call__(self) -> float:
        self.now += self.per_call
        return self.now


def interval_of(taken):
    return speedup_interval([r["dense"] for r in taken], [r["pruned"] for r in taken])


def test_a_clear_case_stops_at_the_first_rounds() -> None:
    taken = rounds_until_decided(rounds(2.0, 0.1), 1.5, TimingBudget(21, 201, 60.0), clock=Clock(0.0))
    assert len(taken) == 21 and interval_of(taken).low >= 1.5


def test_a_close_case_takes_more_rounds_until_the_interval_decides() -> None:
    """At 1.56x with 10 % noise, 21 rounds straddle 1.5x; more rounds narrow the interval past it."""
    assert not interval_of(list(itertools.islice(rounds(1.56, 0.1), 21))).decides(1.5)
    taken = rounds_until_decided(rounds(1.56, 0.1), 1.5, TimingBudget(21, 2001, 60.0), clock=Clock(0.0))
    assert 21 < len(taken) < 2001 and interval_of(taken).decides(1.5) and interval_of(taken).low >= 1.5


def test_the_rounds_stop_at_the_budget_undecided() -> None:
    """Exactly at the threshold nothing decides: the budget ends it, in rounds or in seconds."""
    by_rounds = rounds_until_decided(rounds(1.5, 0.1), 1.5, TimingBudget(21, 60, 60.0), clock=Clock(0.0))
    assert len(by_rounds) == 60 and not interval_of(by_rounds).decides(1.5)
    # each reading of the clock is one second on: 3 seconds allow the first rounds and two extensions
    by_time = rounds_until_decided(rounds(1.5, 0.1), 1.5, TimingBudget(21, 2001, 3.0), clock=Clock(1.0))
    assert len(by_time) == 21 + 10 + 15


def test_a_budget_needs_enough_rounds_for_an_interval() -> None:
    with pytest.raises(ValueError, match="6 <= min_rounds <= max_rounds"):
        TimingBudget(5, 100, 1.0)
    with pytest.raises(ValueError, match="seconds must be 0 or more"):
        TimingBudget(21, 100, -1.0)
