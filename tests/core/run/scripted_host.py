"""Tests only: a run the closed loop can steer on constructed figures, so its decisions are
checked deterministically (no real load, no real clock). The loop sees exactly what it sees of a
TrainingSession: the plan now, the forecast, the predictor, the position, a switch at the next
boundary; the watch is the real one, on a clock that advances by each step's scripted time and a
meter that reads the scripted load.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

from trainpilot import events as ev
from trainpilot.plans import Plan, PlanPrediction
from trainpilot.run.closed_loop import ClosedLoop
from trainpilot.run.forecast import RunForecast
from trainpilot.run.state import Segment, Totals
from trainpilot.run.watch import Watch

ONE, TWO = Plan("cpu", threads=1), Plan("cpu", threads=2)
CORES = 2


@dataclass
class StepTable:
    """Step seconds by (plan, whole cores other processes use)."""

    steps: dict[tuple[Plan, int], float]

    def __call__(self, plan: Plan, others: float) -> float:
        return self.steps[(plan, round(others))]


class TablePredictor:
    """Predicts each plan's run from a step table, with an 80 % interval of +/- `spread`."""

    def __init__(self, table: StepTable, steps_per_epoch: int, spread: float = 0.1, history: Any = None):
        self.table, self.steps_per_epoch, self.spread = table, steps_per_epoch, spread
        if history is not None:
            self.history = history

    def predict(self, profile: Any, plan: Plan, load: Any) -> PlanPrediction:
        others = float(getattr(load, "busy_cores", 0.0)) - float(getattr(load, "ui_cores", 0.0) or 0.0)
        per_epoch = self.table(plan, others) * self.steps_per_epoch
        total = per_epoch * profile.epochs
        interval = {"low_s": total * (1 - self.spread), "high_s": total * (1 + self.spread), "kind": "cold"}
        return PlanPrediction(plan, total, detail={"per_epoch_s": per_epoch, "interval": interval})


class Switcher:
    def __init__(self, host: ScriptedRun):
        self.host = host
        self.last_move_s = 0.0
        self.moves: list[tuple[Plan, str | None, bool]] = []  # (plan, trigger, announced)

    def switch(self, plan, source, reason, confidence, load, trigger=None, announce=True):
        self.moves.append((plan, trigger, announce))
        self.host.plan = plan
        if announce:
            yield ev.BackendChosen(self.host.run_id, plan, confidence, source, reason, trigger=trigger)


class ScriptedMeter:
    def __init__(self, host: ScriptedRun):
        self.host = host

    def __enter__(self) -> ScriptedMeter:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.result = SimpleNamespace(cores=self.host.others(self.host.clock), ui_cores=0.0)


@dataclass
class ScriptedRun:
    """A run of `epochs` x `steps_per_epoch` steps on `plan`, each step taking `truth(plan, load)`
    while other processes use `others(t)` cores."""

    plan: Plan
    truth: Callable[[Plan, float], float]
    predicted: StepTable
    others: Callable[[float], float] = lambda t: 0.0
    epochs: int = 40
    steps_per_epoch: int = 50
    adapt: str = "on"
    history: Any = None
    footprint: str = "scripted|p1|in1|b1"
    run_id: str = "scripted"
    clock: float = 0.0
    trace: list[ev.Event] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.config = SimpleNamespace(adapt=self.adapt, epochs=self.epochs, objective="time")
        self.profile = SimpleNamespace(epochs=self.epochs, footprint=self.footprint, weight_bytes=0)
        self.strategy = SimpleNamespace(adapt_off_reason=lambda: None)
        self.trainer = SimpleNamespace(steps_per_epoch=self.steps_per_epoch)
        self.logical_cpus = CORES
        self.position: tuple[int, int, Totals] = (0, 0, Totals())
        self.switcher = Switcher(self)
        predictor = TablePredictor(self.predicted, self.steps_per_epoch, history=self.history)
        self._orchestrator = SimpleNamespace(predictor=predictor, hardware=SimpleNamespace(machine_id="scripted"))
        self.forecast = RunForecast()
        quiet = SimpleNamespace(busy_cores=self.others(0.0), ui_cores=0.0)
        for plan in {key[0] for key in self.predicted.steps}:
            self.forecast.predictions[plan] = predictor.predict(self.profile, plan, quiet)
        self.loop = ClosedLoop(self, Watch(meter=lambda: ScriptedMeter(self), clock=lambda: self.clock))  # type: ignore[arg-type]
        self.segments = [Segment(self.plan)]

    def trains_whole_epochs(self) -> bool:
        return False

    def run(self, until: Callable[[ScriptedRun], bool] = lambda run: False) -> list[ev.Event]:
        """Every step of the run, the loop at each boundary; stops early once `until` holds."""
        self.trace.extend(self.loop.begin(SimpleNamespace(busy_cores=self.others(0.0), ui_cores=0.0), "agent"))
        for epoch in range(self.epochs):
            for step in range(self.steps_per_epoch):
                self.position = (epoch, step, Totals())
                seconds = self.truth(self.plan, self.others(self.clock))
                self.clock += seconds
                self.loop.stepped(seconds)
                self.position = (epoch, step + 1, Totals())
                self.trace.extend(self.loop.at_boundary(self.segments))
                if until(self):
                    return self.trace
        self.loop.end()
        return self.trace

    def texts(self, phase: str | None = None) -> list[str]:
        return [e.text for e in self.trace if isinstance(e, ev.AgentStepped) and (phase is None or e.phase == phase)]

    def moves(self) -> list[ev.BackendChosen]:
        return [e for e in self.trace if isinstance(e, ev.BackendChosen)]
