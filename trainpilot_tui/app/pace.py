"""How often the app samples and paints, given the plan the run is on.

Every frame the app draws is CPU. When the run's plan leaves a core free, that CPU is spare and the
app refreshes at its rate (1 Hz by default). When the plan trains on every core the machine lets
this process use, each frame preempts a training thread, and PyTorch's threads wait for each other
at every operation, so the others stall with it: on 2 cores the app's small share of a core cost
large_dense a few per cent of its training time (benchmarks/tui_overhead.py; measured:
docs/measurements.md#cited-in-the-code-the-app). Then the app refreshes half as often, 2 s a sample
and 8 s for the per-epoch figures, which used less of a core in a real large_dense run at 160x48,
both settings in one run (measured: docs/app.md#the-apps-own-load). A rate the user asked for
(--refresh-hz) is kept as asked.

Pure: the main screen asks `follow(plan)` as it handles a chosen plan (or a run's end) and shows
what changed; the app tells the session.
"""
from __future__ import annotations

from trainpilot.machine.probe import usable_cpus
from trainpilot.plans import SPLIT, Plan

BUSY_FACTOR = 2.0  # the refresh interval's stretch while the run holds every core
FIGURES_PER_REFRESH = 4  # the per-epoch figures (each a layout of the screen): once in this many refreshes


def cpu_threads(plan: Plan, cpus: int) -> int:
    """The host threads a plan trains with on `cpus` CPUs: its CPU threads (all of them when it
    names none, as PyTorch does), or its CPU workers' for a split plan. An accelerator plan's host
    thread mostly waits on the device: it holds no core."""
    if plan.backend == "cpu":
        return plan.threads or cpus
    if plan.backend == SPLIT:
        return sum(cpu_threads(worker, cpus) for worker in plan.workers if worker.backend == "cpu")
    return 0


def holds_every_core(plan: Plan, cpus: int | None = None) -> bool:
    cpus = cpus if cpus is not None else usable_cpus()
    return cpu_threads(plan, cpus) >= cpus


class Pace:
    def __init__(self, refresh_hz: float, adaptive: bool = True) -> None:
        """`refresh_hz`: the rate while the run leaves a core free (and before any run).
        `adaptive`: False keeps that rate whatever the plan (the user chose it)."""
        self.base_s = 1.0 / refresh_hz
        self.adaptive = adaptive
        self.interval_s = self.base_s
        self.busy = False  # the run's plan holds every core, and the app has slowed for it

    @property
    def figures_interval_s(self) -> float:
        return FIGURES_PER_REFRESH * self.interval_s

    def interval_for(self, plan: Plan | None, cpus: int | None = None) -> float:
        """The interval `follow(plan)` sets, without setting it."""
        busy = self.adaptive and plan is not None and holds_every_core(plan, cpus)
        return self.base_s * (BUSY_FACTOR if busy else 1.0)

    def follow(self, plan: Plan | None, cpus: int | None = None) -> bool:
        """Set the interval for `plan` (None: no run). True when it changed."""
        interval = self.interval_for(plan, cpus)
        changed = interval != self.interval_s
        self.busy, self.interval_s = interval != self.base_s, interval
        return changed
