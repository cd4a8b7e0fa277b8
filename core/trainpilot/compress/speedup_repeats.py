"""How many rounds a speed-up is timed for: until its interval decides against a threshold.

A fixed count of rounds is too many for a configuration far from the threshold and too few for one
near it: at 21 rounds the interval of a pruned model at the target straddles it, and the decision
is the noise's (docs/compression.md#where-the-speed-was-lost). So the rounds grow (speedup_interval.py)
until the interval lies wholly on one side of the threshold, or the time budget is spent, or
`max_rounds` is reached; an undecided interval is returned as it stands, and the rule reading it
says how sure it is.

Rounds come from an iterator (cycles.timed_rounds on this machine) and time from `clock`, so the
stopping rule is tested on constructed step times without timing anything.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from trainpilot.compress.speedup_interval import MIN_ROUNDS

# Each extension adds half the rounds timed so far: the interval's width falls as 1/sqrt(rounds),
# so the extensions grow geometrically instead of re-deciding after every round.
GROWTH = 0.5


@dataclass(frozen=True)
class TimingBudget:
    """What one speed-up decision may spend: at least `min_rounds` rounds, then more until the
    interval decides, while under `seconds` and `max_rounds`."""

    min_rounds: int = 21
    max_rounds: int = 201
    seconds: float = 5.0

    def __post_init__(self) -> None:
        if self.min_rounds < MIN_ROUNDS or self.max_rounds < self.min_rounds:
            raise ValueError(
                f"a timing budget needs {MIN_ROUNDS} <= min_rounds <= max_rounds,"
                f" got {self.min_rounds} and {self.max_rounds}"
            )
        if not self.seconds >= 0.0:
            raise ValueError(f"a timing budget's seconds must be 0 or more, got {self.seconds:g}")


def rounds_until_decided(
    rounds: Iterator[dict[str, float]],
    threshold: float,
    budget: TimingBudget,
    *,
    key: str = "pruned",
    base: str = "dense",
    clock: Callable[[], float] = time.perf_counter,
) -> list[dict[str, float]]:
    """Rounds taken from `rounds` until `key`'s speed-up interval over `base` decides against
    `threshold`, the budget's seconds have passed (counted from the first call), or its max_rounds."""
    from trainpilot.compress.speedup_interval import speedup_interval

    started = clock()
    taken = list(itertools.islice(rounds, budget.min_rounds))
    while len(taken) < budget.max_rounds and clock() - started < budget.seconds:
        interval = speedup_interval([r[base] for r in taken], [r[key] for r in taken])
        if interval.decides(threshold):
            break
        more = min(max(1, int(len(taken) * GROWTH)), budget.max_rounds - len(taken))
        taken.extend(itertools.islice(rounds, more))
    return taken
