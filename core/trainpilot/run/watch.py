"""What the closed loop sees of a run between its steps: windows of about half a second, each with
the CPU that other processes used over it (the app's own UI apart: machine/contention.py) and the
median time of the steps trained in it. Reading a window costs a few /proc reads; a step costs an
append, so the watch stays far below 1 % of a quiet epoch (docs/adaptation.md#what-the-watch-costs).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

WINDOW_S = 0.5  # long enough that a 0.3 s scheduler hiccup is a minority of it; short enough to react in ~1 s


@dataclass(frozen=True)
class Window:
    """One closed window: other processes' cores (UI apart) and the median step time in it."""

    others: float
    ui: float
    step_s: float | None  # None: no step of the current plan finished in it (a switch, validation)
    steps: int
    wall_s: float


class Watch:
    """Collects step times and opens and closes load windows at step boundaries (never mid-step,
    never from another thread). `clock` and `meter` are injectable for tests of the rule around it."""

    def __init__(
        self,
        meter: Callable[[], Any] | None = None,
        clock: Callable[[], float] = time.perf_counter,
        window_s: float = WINDOW_S,
    ):
        if meter is None:
            from trainpilot.machine.contention import ExternalCpuMeter

            meter = ExternalCpuMeter
        self._new_meter, self._clock, self.window_s = meter, clock, window_s
        self._meter: Any = None
        self._opened = 0.0
        self._steps: list[float] = []
        self._skip = 0  # steps not to count: the first after a move warms the new plan up

    def start(self) -> None:
        self._open()

    def _open(self) -> None:
        self._meter = self._new_meter().__enter__()
        self._opened = self._clock()
        self._steps = []

    def stepped(self, seconds: float) -> None:
        if self._skip:
            self._skip -= 1
            return
        self._steps.append(seconds)

    def moved(self) -> None:
        """The plan changed: the steps so far were another plan's, and the next one warms up."""
        self._steps = []
        self._skip = 1

    def boundary(self) -> Window | None:
        """At a step boundary: the window just closed, if it is long enough, else None."""
        if self._meter is None:
            return None
        wall = self._clock() - self._opened
        if wall < self.window_s:
            return None
        meter = self._meter
        try:
            meter.__exit__(None, None, None)
            cores, ui = float(meter.result.cores), float(meter.result.ui_cores)
        except Exception:  # noqa: BLE001 - a /proc that cannot be read costs the load reading, not the run
            cores = ui = 0.0
        steps = self._steps
        self._open()
        return Window(
            others=max(cores - ui, 0.0),
            ui=ui,
            step_s=statistics.median(steps) if steps else None,
            steps=len(steps),
            wall_s=wall,
        )

    def close(self) -> None:
        if self._meter is not None:
            try:
                self._meter.__exit__(None, None, None)
            except Exception:  # noqa: BLE001 - closing a meter must never fail a run
                pass
            self._meter = None
