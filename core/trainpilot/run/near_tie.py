"""Verifying a near tie on the run's own steps: when the chosen plan and its runner-up cannot be
told apart by prediction, the run trains on both in alternating blocks (A B B A A B ...: a drift
in the machine's speed cancels within each pair, and every other block needs no move) and keeps
the one measured faster. Same batches, same weights and optimizer state carried across, same
math: the trial's steps are training steps, so what it costs is the runner-up's extra time, if it
is slower, plus the moves.

Each block's first step warms the plan up and is not counted; a block's figure is the median of
the rest. The ratio of the pair's medians is one paired observation; the trial decides when their
mean (in logs) is beyond MIN_DIFFERENCE and DECISIVE standard errors from zero, or when its budget
is spent; then the plan ahead by MIN_DIFFERENCE and FINAL standard errors is kept. Undecided, the
run keeps PyTorch's default way of the two. (At the end, 2 standard errors kept PyTorch's default
of 2 threads beside a busy core after a trial had measured 1 thread far faster through the busy
core's noise: the worst of the two there.)
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field

from trainpilot.plans import Plan

MIN_DIFFERENCE = 0.02  # a 2 % difference is too small to be worth keeping a non-default plan for
DECISIVE = 2.5  # standard errors, to stop early: looked at after every pair, so stricter than ...
FINAL = 1.0  # ... at the budget's end: the one measured faster by a standard error (about 84 % sure)
MIN_PAIRS = 3
MAX_PAIRS = 12
BLOCK_S = 0.15  # each block long enough that one slow step moves its median little
BUDGET_FRACTION = 0.05  # of the run's remaining time, spent on the runner-up at most


def default_distance(plan: Plan, default_threads: int) -> int:
    """How many settings `plan` changes from PyTorch's default way (eager CPU, its default
    threads, NCHW, fp32, batches loaded in the process): the tie-breaker when both measure alike."""
    if plan.backend != "cpu":
        return 5
    return (
        int(plan.threads not in (None, default_threads))
        + int(plan.mode is not None)
        + int(bool(plan.memory_format))
        + int(bool(plan.precision))
        + int(bool(plan.loader_workers))
    )


@dataclass(frozen=True)
class TrialPlan:
    """What a trial will do, and whether the run can pay for it."""

    first: Plan  # the chosen plan
    second: Plan  # its runner-up
    block_steps: int  # counted steps per block (one more warms up)
    pairs: int  # most pairs the budget allows
    budget_s: float

    @property
    def affordable(self) -> bool:
        return self.pairs >= MIN_PAIRS


def trial_plan(first: Plan, second: Plan, step_s: float, remaining_s: float) -> TrialPlan:
    """Size the trial from the chosen plan's measured step and the run's remaining time."""
    block = max(3, math.ceil(BLOCK_S / max(step_s, 1e-6)))
    budget = BUDGET_FRACTION * remaining_s
    per_block = (block + 1) * step_s
    pairs = min(MAX_PAIRS, int(budget // per_block)) if per_block > 0 else 0
    return TrialPlan(first, second, block, pairs, budget)


@dataclass
class Trial:
    spec: TrialPlan
    blocks: list[tuple[Plan, float]] = field(default_factory=list)  # (plan, median step) per finished block
    _steps: list[float] = field(default_factory=list)
    _seen: int = 0

    @property
    def order(self) -> tuple[Plan, ...]:
        a, b = self.spec.first, self.spec.second
        return (a, b, b, a)  # ABBA: the pattern repeats A B B A A B B A ...

    def plan_now(self) -> Plan:
        return self.order[len(self.blocks) % 4]

    def stepped(self, seconds: float) -> bool:
        """Count a step of the current block; True when the block is complete."""
        self._seen += 1
        if self._seen > 1:  # the block's first step warms the plan up
            self._steps.append(seconds)
        if len(self._steps) < self.spec.block_steps:
            return False
        self.blocks.append((self.plan_now(), statistics.median(self._steps)))
        self._steps, self._seen = [], 0
        return True

    def log_ratios(self) -> list[float]:
        """log(second / first), one per complete pair of blocks."""
        out = []
        for i in range(0, len(self.blocks) - 1, 2):
            times = dict(self.blocks[i : i + 2])
            first, second = times.get(self.spec.first), times.get(self.spec.second)
            if first and second:
                out.append(math.log(second / first))
        return out

    def verdict(self) -> Verdict | None:
        """The trial's answer once it can give one (None: go on)."""
        ratios = self.log_ratios()
        n = len(ratios)
        if n < MIN_PAIRS:
            return None
        mean = statistics.fmean(ratios)
        se = statistics.stdev(ratios) / math.sqrt(n) if n > 1 else math.inf
        last = n >= self.spec.pairs
        decided = abs(mean) >= math.log1p(MIN_DIFFERENCE) and abs(mean) > (FINAL if last else DECISIVE) * se
        if decided or last:
            return Verdict(self.spec, math.exp(mean), math.exp(se) - 1.0, n, decided, tuple(self.blocks))
        return None


@dataclass(frozen=True)
class Verdict:
    spec: TrialPlan
    ratio: float  # second's step over first's: above 1, the chosen plan is faster
    spread: float  # one standard error of the ratio, relative
    pairs: int
    decided: bool
    blocks: tuple[tuple[Plan, float], ...] = ()

    def medians(self) -> dict[Plan, float]:
        """Each plan's step time over its blocks (the median of the blocks' medians)."""
        out: dict[Plan, list[float]] = {}
        for plan, step in self.blocks:
            out.setdefault(plan, []).append(step)
        return {plan: statistics.median(steps) for plan, steps in out.items()}

    def keep(self, default_threads: int) -> Plan:
        first, second = self.spec.first, self.spec.second
        if self.decided:
            return first if self.ratio > 1.0 else second
        return min((first, second), key=lambda p: default_distance(p, default_threads))

    def text(self, default_threads: int) -> str:
        kept = self.keep(default_threads)
        first, second = self.spec.first, self.spec.second
        measured = (
            f"{second.short_label} stepped {self.ratio:.2f}x the time of {first.short_label}"
            f" (±{self.spread:.0%}, {self.pairs} pairs of blocks)"
        )
        if self.decided:
            return f"{measured}: keeping {kept.short_label}, measured faster"
        return (
            f"{measured}: no difference beyond the noise; keeping {kept.short_label},"
            " the one closer to PyTorch's default"
        )
