"""The rule that moves a running job: the current plan's measured pace against every other plan's
pace under the load seen now (measured where the plan met such a load, else predicted), over the
steps that remain, minus the cost of moving.

The other plans' predictions are scaled by how far this run's own measured pace is from its own
plan's prediction (the `bias`: what the cost model misses about this job on this machine, seen on
real steps), so the comparison is measured against measured-corrected, not measured against raw.
A move must save more than MARGIN of the remaining time, and at least MIN_SAVING_S, after paying
for itself: a prediction error of a few percent never moves a run, and neither does a saving too
small to notice. The rule is symmetric, so when the load leaves, it moves back the same way.
"""

from __future__ import annotations

from dataclasses import dataclass

from trainpilot.plans import Plan
from trainpilot.units import seconds as fmt_s

MARGIN = 0.15  # of the remaining time: wider than the cost model's typical miss on a shared machine
MIN_SAVING_S = 0.25
BIAS_LIMITS = (0.5, 2.0)  # a bias outside this says the step time is not what the model describes at all


@dataclass(frozen=True)
class Option:
    """Another plan as the re-think sees it: its predicted step under the load now."""

    plan: Plan
    step_s: float  # measured on this run under this load, else predicted and scaled by the run's bias
    move_s: float  # what moving there costs (measured where a move of that kind was made)
    measured: bool = False  # whether step_s was measured on this machine for this workload, not predicted
    where: str = ""  # where it was measured: "this run" or "earlier runs"


@dataclass(frozen=True)
class Rethink:
    current: Plan
    current_step_s: float  # measured
    remaining_steps: int
    best: Option | None  # the fastest other plan, whether or not it pays
    moves: bool

    @property
    def current_s(self) -> float:
        return self.current_step_s * self.remaining_steps

    @property
    def best_s(self) -> float | None:
        return self.best.step_s * self.remaining_steps if self.best is not None else None

    @property
    def factor(self) -> float | None:
        """How many times faster the best other plan is predicted to be."""
        if self.best is None or self.best.step_s <= 0:
            return None
        return self.current_step_s / self.best.step_s

    def text(self) -> str:
        if self.best is None:
            return f"{self.current.short_label} stays: no other plan can take the run here"
        factor, best_s = self.factor, self.best_s
        assert factor is not None and best_s is not None
        said = "predicted"
        if self.best.measured:
            said = "measured in earlier runs" if self.best.where == "earlier runs" else "measured"
        if self.moves:
            return (
                f"{self.best.plan.short_label} {said} {factor:.1f}x faster for the remaining {fmt_s(self.current_s)}"
                f" ({fmt_s(best_s)}); moving costs ~{fmt_s(self.best.move_s)}"
            )
        if factor <= 1.0:
            other = self.best.plan.short_label
            return f"{self.current.short_label} stays: the best other, {other}, is {said} {1 / factor:.2f}x slower"
        return (
            f"{self.current.short_label} stays: {self.best.plan.short_label} is {said} {factor:.2f}x faster for"
            f" the remaining {fmt_s(self.current_s)}, inside the {MARGIN:.0%} margin once moving"
            f" (~{fmt_s(self.best.move_s)}) is paid"
        )


def clamp_bias(measured_step_s: float, predicted_step_s: float | None) -> float:
    if not predicted_step_s or predicted_step_s <= 0 or measured_step_s <= 0:
        return 1.0
    low, high = BIAS_LIMITS
    return min(max(measured_step_s / predicted_step_s, low), high)


def rethink(current: Plan, current_step_s: float, remaining_steps: int, options: list[Option]) -> Rethink:
    """Whether to move, and where: the fastest other option, if its saving beats the margin."""
    others = [o for o in options if o.plan != current and o.step_s > 0]
    best = min(others, key=lambda o: o.step_s * remaining_steps + o.move_s, default=None)
    moves = False
    if best is not None:
        stay_s = current_step_s * remaining_steps
        saving = stay_s - (best.step_s * remaining_steps + best.move_s)
        moves = saving > max(MARGIN * stay_s, MIN_SAVING_S)
    return Rethink(current, current_step_s, remaining_steps, best, moves)
