"""Test doubles for the TUI: a scripted training session and scripted hardware samples.

`ScriptedSession` speaks the same protocol as `trainpilot.run.session.TrainingSession` (events(),
override_backend, release, pause, resume, request_stop, plan, paused) and yields canned,
deterministic events: the same kinds and shapes the core emits, with fixed timestamps and figures.
Steering requests are queued and applied at step boundaries, as the core does. It can hold at a
chosen step (like a slow step that never ends) until `proceed()`, so a test can act mid-run
without racing the script. Like the core's closed loop, an override pins the plan, `release()`
hands it back (the agent moves the run back to its own plan), and `replans` script the agent's
own moves mid-run.
"""
from __future__ import annotations

import queue
import threading
from dataclasses import dataclass, field
from typing import Any, Iterator

from trainpilot import events as ev
from trainpilot.machine.monitor import Reading, UtilizationSample
from trainpilot.agent.plan_summary import summarize
from trainpilot.plans import Availability, Decision, Plan, PlanPrediction
from trainpilot.run.session import SessionConfig

RUN_ID = "20260101-120000-test"
AVAILABILITY = {
    "cpu": Availability(True),
    "ane": Availability(False, "not Apple Silicon"),
    "mps": Availability(False, "not macOS"),
    "cuda": Availability(True),
}
# predicted whole-run seconds per plan, as the agent's think steps state them
PREDICTIONS = {Plan("cpu", threads=1): 9.0, Plan("cpu", threads=2): 6.0, Plan("cuda", device="cuda:0"): 3.0}
# actual seconds per step on each backend (the scripted truth the predictions are compared with)
STEP_SECONDS = {"cpu": 0.2, "cuda": 0.12}
AT = 1_767_268_800.0  # fixed event timestamps
# the core's words when an override pins the plan (run/closed_loop.py)
PINNED = "the plan is pinned by your override: the agent watches but does not move it until you hand the run back"


@dataclass
class ScriptedSession:
    config: SessionConfig
    steps_per_epoch: int = 10
    holds: tuple[tuple[int, int], ...] = ()  # (epoch, step) boundaries to stop at until proceed()
    replans: tuple[tuple[int, int, Plan, str], ...] = ()  # (epoch, step, plan, trigger): the agent moves the run
    start_plan: Plan = Plan("cpu", threads=2)
    availability: dict[str, Availability] = field(default_factory=lambda: dict(AVAILABILITY))
    run_id: str = RUN_ID
    predictions: dict[Plan, float] = field(default_factory=lambda: dict(PREDICTIONS))  # the plans the agent weighs

    def __post_init__(self) -> None:
        self._commands: "queue.Queue[tuple[str, Any]]" = queue.Queue()
        self._paused = False
        self.holding = threading.Event()  # set while held at a boundary
        self.held_at: tuple[int, int] | None = None
        self.stop_reason: str | None = None
        self.plan: Plan | None = None
        self.checkpoints: list[ev.CheckpointSaved] = []
        self.finished: ev.RunFinished | None = None
        self.override_requests: list[str] = []
        self.override_calls: list[dict[str, Any]] = []  # every override_backend call, with its arguments
        self.release_calls = 0
        self.pinned = False  # the user's override holds the plan: the agent does not move it

    # ---------------------------------------------------------------- steering (any thread)

    def override_backend(
        self,
        backend: str,
        threads: int | None = None,
        mode: str | None = None,
        memory_format: str | None = None,
        precision: str | None = None,
    ) -> Availability:
        self.override_requests.append(backend)
        self.override_calls.append(dict(backend=backend, threads=threads, mode=mode, memory_format=memory_format,
                                        precision=precision))
        avail = self.availability.get(backend, Availability(False, f"unknown backend '{backend}'"))
        self._commands.put(("override", (backend, threads, mode, avail, memory_format, precision)))
        return avail

    def pause(self) -> None:
        self._commands.put(("pause", None))

    def resume(self) -> None:
        self._commands.put(("resume", None))

    def request_stop(self, reason: str = "user") -> None:
        self.stop_reason = self.stop_reason or reason
        self._commands.put(("wake", None))

    def release(self) -> None:
        """Hand an overridden run back to the agent (the core's TrainingSession.release)."""
        self.release_calls += 1
        self._commands.put(("release", None))

    def proceed(self) -> None:
        """Let a run held at a boundary (`holds`) go on."""
        self._commands.put(("proceed", None))

    @property
    def paused(self) -> bool:
        return self._paused

    # ---------------------------------------------------------------- the stream

    def events(self) -> Iterator[ev.Event]:
        cfg = self.config
        yield ev.SessionStarted(self.run_id, "small_cnn", "demo", cfg.epochs, cfg.batch_size, 2160, 240, at=AT)
        observation = {
            "backends": {name: a.display for name, a in self.availability.items()},
            "available_backends": [n for n, a in self.availability.items() if a],
            "cpu_utilization": 0.12,
        }
        text = "workload small_cnn: 23,466 params, 3 layers, 2.1 MFLOP/sample, 2160 samples; CPU 12% busy, ANE unavailable"
        yield ev.HardwareObserved(self.run_id, {"model": "small_cnn"}, observation, text, at=AT)
        yield ev.AgentStepped(self.run_id, "observe", text, None, {"data": {"hardware": observation}}, at=AT)
        # as the agent says it (agent/orchestrator.py): a step per plan, then the decision with its summary
        predictions = []
        for plan, seconds in self.predictions.items():
            predictions.append(PlanPrediction(plan, seconds, source="estimate"))
            yield ev.AgentStepped(self.run_id, "think", f"{plan.label}: predicted {seconds:.2f}s (estimate)", None, {"plan": plan.to_dict(), "predicted_s": seconds, "source": "estimate", "part": "plan"}, at=AT)
        for name in ("ane", "mps"):
            reason = self.availability[name].reason
            predictions.append(PlanPrediction(Plan(name), None, excluded_reason=reason))
            yield ev.AgentStepped(self.run_id, "think", f"{name}: excluded — {reason}", None, {"plan": Plan(name).to_dict(), "excluded": reason, "part": "plan"}, at=AT)
        why = "rule cascade: the Neural Engine is not available here, so the CPU runs it -> cpu (confidence 0.80)"
        decision = Decision(self.start_plan, self.predictions[self.start_plan], 0.8, (why,), 0.5, "rules")
        yield ev.AgentStepped(self.run_id, "think", why, 0.8, {"part": "reason"}, at=AT)
        summary = summarize(predictions, decision).to_dict()
        yield ev.AgentStepped(self.run_id, "think", f"decision: {self.start_plan.label}, predicted {self.predictions[self.start_plan]:.2f}s, confidence 0.80 (rules)", 0.8, {"plan": self.start_plan.to_dict(), "policy": "rules", "margin": 0.5, "summary": summary}, at=AT)
        yield from self._switch(self.start_plan, "agent", "fastest by estimate", 0.8)
        if cfg.adapt == "off":
            off = "adaptation off (--adapt off): the plan stays as decided for the whole run"
            yield ev.AgentStepped(self.run_id, "act", off, None, {"adapt": "off"}, at=AT)
        for epoch in range(1, cfg.epochs + 1):
            segments = [{"plan": self.plan.to_dict(), "steps": 0, "actual_s": 0.0}]  # type: ignore[union-attr]
            loss = 2.3 / epoch
            for step in range(self.steps_per_epoch):
                yield from self._boundary(epoch, step, segments)
                if self.stop_reason:
                    checkpoint = ev.CheckpointSaved(self.run_id, f"/checkpoints/{self.run_id}/latest.pt", epoch - 1, step, "interrupt", at=AT)
                    self.checkpoints.append(checkpoint)
                    yield checkpoint
                    yield self._finish("interrupted", f"stopped ({self.stop_reason}) at epoch {epoch}, step {step}")
                    return
                assert self.plan is not None
                segments[-1]["steps"] += 1
                segments[-1]["actual_s"] += STEP_SECONDS[self.plan.backend]
                loss *= 0.97
                done = sum(s["actual_s"] for s in segments)
                yield ev.StepProgressed(self.run_id, epoch, step + 1, self.steps_per_epoch, round(loss, 4), round(done, 4), round((cfg.epochs - epoch) * 2.0 + (self.steps_per_epoch - step - 1) * 0.2, 4), at=AT)
            for seg in segments:
                seg["predicted_s"] = round(self.predictions[Plan.from_dict(seg["plan"])] / cfg.epochs * seg["steps"] / self.steps_per_epoch, 4)
                seg["actual_s"] = round(seg["actual_s"], 4)
            pieces = tuple(s for s in segments if s["steps"])
            predicted = round(sum(s["predicted_s"] for s in pieces), 4)
            actual = round(sum(s["actual_s"] for s in pieces), 4)
            yield ev.EpochTimed(self.run_id, epoch, round(loss, 4), 0.5 + 0.1 * epoch, 0.45 + 0.1 * epoch, predicted, actual, self.plan, pieces, at=AT)  # type: ignore[arg-type]
            checkpoint = ev.CheckpointSaved(self.run_id, f"/checkpoints/{self.run_id}/latest.pt", epoch, 0, "epoch", at=AT)
            self.checkpoints.append(checkpoint)
            yield checkpoint
        yield self._finish("success", f"trained {cfg.epochs} epoch(s) on {self.plan.short_label}")  # type: ignore[union-attr]

    def _switch(self, plan: Plan, source: str, reason: str, confidence: float | None) -> Iterator[ev.Event]:
        cost = None if self.plan is None else (0.0 if self.plan.backend == plan.backend == "cpu" else 0.05)
        self.plan = plan
        yield ev.BackendChosen(self.run_id, plan, confidence, source, reason, self.predictions.get(plan), cost, at=AT)

    def _boundary(self, epoch: int, step: int, segments: list[dict[str, Any]]) -> Iterator[ev.Event]:
        for at_epoch, at_step, plan, trigger in self.replans:
            if (at_epoch, at_step) == (epoch, step) and not self.pinned and plan != self.plan:
                yield from self._replan(plan, trigger, epoch, step, segments)
        hold = (epoch, step) in self.holds
        while True:
            try:
                kind, arg = self._commands.get_nowait()
            except queue.Empty:
                if self.stop_reason:
                    return
                if hold:
                    self.held_at = (epoch, step)
                    self.holding.set()
                elif not self._paused:
                    return
                kind, arg = self._commands.get()  # blocked: paused or held; any command wakes us
            if kind == "proceed" and hold:
                hold = False
                self.held_at = None
                self.holding.clear()
            elif kind == "pause" and not self._paused:
                self._paused = True
                yield ev.SessionPaused(self.run_id, epoch, step, at=AT)
            elif kind == "resume" and self._paused:
                self._paused = False
                yield ev.SessionResumed(self.run_id, epoch, step, at=AT)
            elif kind == "override":
                backend, threads, mode, avail, memory_format, precision = arg
                if not avail:
                    yield ev.OverrideRefused(self.run_id, backend, avail.reason, at=AT)
                    continue
                plan = Plan("cuda", device="cuda:0") if backend == "cuda" else Plan("cpu", threads=threads or 2, mode=mode)
                plan = plan.with_settings(memory_format, precision)  # None (a direct key): the defaults
                if plan != self.plan:
                    yield from self._switch(plan, "user", f"user override to {plan.short_label}", None)
                    segments.append({"plan": plan.to_dict(), "steps": 0, "actual_s": 0.0})
                    if not self.pinned and self.config.adapt != "off":
                        self.pinned = True
                        yield ev.AgentStepped(self.run_id, "act", PINNED, None, {"adapt": "pinned"}, at=AT)
            elif kind == "release":
                yield from self._hand_back(epoch, step, segments)

    def _hand_back(self, epoch: int, step: int, segments: list[dict[str, Any]]) -> Iterator[ev.Event]:
        """The core's ClosedLoop.release: the agent decides again; here it takes its own plan back."""
        if self.config.adapt == "off":
            text = "nothing to hand back: adaptation is off for this run"
        elif not self.pinned:
            text = "the run is already the agent's: nothing pinned it"
        else:
            text = "you handed the run back: the agent decides again"
        data = {"adapt": "released"} if text.startswith("you handed") else {}
        yield ev.AgentStepped(self.run_id, "act", text, None, data, at=AT)
        if self.pinned and self.config.adapt != "off":
            self.pinned = False
            if self.plan != self.start_plan:
                yield from self._replan(self.start_plan, "release", epoch, step, segments)

    def _replan(
        self, plan: Plan, trigger: str, epoch: int, step: int, segments: list[dict[str, Any]]
    ) -> Iterator[ev.Event]:
        """The agent moves the run, as the core's closed loop does: its reasoning, then the plan."""
        seen = "other processes now use 1.0 core(s) (was 0.0)"
        yield ev.AgentStepped(self.run_id, "observe", seen, None, {"trigger": trigger, "other_cores": 1.0}, at=AT)
        think = f"{plan.short_label} is predicted faster for the rest of the run: move"
        yield ev.AgentStepped(self.run_id, "think", think, None, {"trigger_rule": "replan", "moves": True}, at=AT)
        act = f"moving to {plan.short_label} at epoch {epoch}, step {step}"
        yield ev.AgentStepped(self.run_id, "act", act, None, {"trigger": trigger}, at=AT)
        cost = 0.0 if self.plan is not None and self.plan.backend == plan.backend == "cpu" else 0.05
        self.plan = plan
        yield ev.BackendChosen(
            self.run_id, plan, None, "replan", f"re-planned ({trigger})", self.predictions.get(plan), cost,
            trigger=trigger, at=AT,
        )
        segments.append({"plan": plan.to_dict(), "steps": 0, "actual_s": 0.0})

    def _finish(self, status: str, message: str) -> ev.RunFinished:
        self.finished = ev.RunFinished(self.run_id, status, message, {"status": status, "run_id": self.run_id}, at=AT)
        return self.finished


class SessionFactory:
    """Builds one ScriptedSession per run the app starts, and remembers them."""

    def __init__(self, **options: Any) -> None:
        self.options = options
        self.sessions: list[ScriptedSession] = []

    def __call__(self, config: SessionConfig) -> ScriptedSession:
        session = ScriptedSession(config, **self.options)
        self.sessions.append(session)
        return session

    @property
    def last(self) -> ScriptedSession:
        return self.sessions[-1]


def scripted_samples(count: int = 40, cores: int = 4) -> list[UtilizationSample]:
    """Deterministic samples: a slow wave of load over `cores` CPUs and an estimated ANE reading."""
    out = []
    for i in range(count):
        per_core = tuple(float((i * 7 + c * 23) % 100) for c in range(cores))
        out.append(
            UtilizationSample(
                at=AT + i * 0.5,
                per_core=per_core,
                cpu_percent=sum(per_core) / cores,
                memory_percent=40.0 + (i % 10),
                memory_used_bytes=6_400_000_000 + i * 10_000_000,
                process_rss_bytes=500_000_000 + i * 4_000_000,
                readings=(Reading("ANE power", 1.2 + 0.1 * (i % 3), "W", estimate=True), Reading("GPU utilisation", None, "%", note="no sampler for this GPU")),
            )
        )
    return out


def sample_source(samples: list[UtilizationSample]):  # type: ignore[no-untyped-def]
    """A SampleSource for TrainPilotApp(samples=...): the whole list, then done."""
    return lambda stop: iter(samples)
