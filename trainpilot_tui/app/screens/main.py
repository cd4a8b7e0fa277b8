"""The one screen: Hardware, Run and Agent panels, and the footer with the keys.

Session and sampler workers post their messages here. Each handler sets reactive state on a panel
or appends to the trace (and follows the pace for a chosen plan), nothing else; the messages then
bubble on to the app, which keeps the control state (running, paused, what to do when a run stops).
"""
from __future__ import annotations

import time

from textual.app import ComposeResult
from textual.message import Message
from textual.screen import Screen
from textual.timer import Timer
from textual.widgets import Footer

from trainpilot import events as ev
from trainpilot.plans import Plan

from .. import messages as msg
from ..decision import Decision, adaptation_off, is_hand_back
from ..pace import Pace
from ..plan_book import PlanBook
from ..trace import TraceEntry, entries_for
from ..widgets import AgentPanel, HardwarePanel, RunPanel


class MainScreen(Screen[None]):
    CSS_PATH = "main.tcss"
    # Responsive classes on the screen: the .tcss files switch layouts on them.
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (120, "-wide")]

    class Ready(Message):
        """The panels exist: the app may start streaming into them."""

    def __init__(self, pace: Pace | None = None, release_key: str | None = None) -> None:
        """`pace`: how often to paint (pace.py), followed as it changes. Step progress is painted
        with each hardware sample (or after two intervals when no sample comes), the per-epoch
        figures with the first sample at least `figures_interval_s` after they were last painted.
        The core sends up to 20 steps a second and, on a small model, several epochs a second (mlp,
        each with an agent step and a checkpoint); painting each as it came took the app to dozens
        of frames a second and a good part of a core, taken from the training it shows
        (benchmarks/tui_overhead.py; measured: docs/app.md#the-apps-own-load,
        docs/measurements.md#cited-in-the-code-the-app). Painted at the refresh rate the figures read
        the same. `release_key`: the app's key that hands an overridden run back to the agent,
        named on the Run panel's plan line."""
        super().__init__()
        self.pace = pace or Pace(2.0)
        self.release_key = release_key
        self.book = PlanBook()
        self._progress: ev.StepProgressed | None = None  # newest, not yet shown
        self._paced: list[msg.SessionMessage] = []  # per-epoch messages not yet shown, in order
        self._progress_shown_at = float("-inf")
        # The per-epoch figures (table, chart, trace) cost layouts of the screen each time, dearer than
        # progress and hardware: painted at most once a figures interval. Measured on mlp (0.1-s
        # epochs, 2 threads on 2 cores; tui_overhead.py --model mlp --repeats 3), painting them once
        # in two seconds slowed training less than once a second
        # (docs/measurements.md#cited-in-the-code-the-app). A model whose epochs take longer than
        # this shows each epoch with the next sample, as before.
        self._figures_shown_at = float("-inf")
        self._paint_timer: Timer | None = None

    @property
    def progress_interval_s(self) -> float:
        return self.pace.interval_s

    @property
    def figures_interval_s(self) -> float:
        return self.pace.figures_interval_s

    def on_mount(self) -> None:
        self.post_message(self.Ready())

    def compose(self) -> ComposeResult:
        yield HardwarePanel(id="hardware")
        yield RunPanel(id="run")
        yield AgentPanel(id="agent")
        yield Footer()

    @property
    def hardware_panel(self) -> HardwarePanel:
        return self.query_one(HardwarePanel)

    @property
    def run_panel(self) -> RunPanel:
        return self.query_one(RunPanel)

    @property
    def agent_panel(self) -> AgentPanel:
        return self.query_one(AgentPanel)

    # ---------------------------------------------------------------- called by the app

    def begin_run(self) -> None:
        """A new session is about to stream: clear the run's figures, keep the trace (it is the
        session history) and the hardware view."""
        self._paint(everything=True)  # the last run's figures still waiting go out under that run
        self.book = PlanBook(availability=dict(self.book.availability))
        self.run_panel.reset()
        self.run_panel.release_key = self.release_key  # until the run says its plan stays put
        self.hardware_panel.backends = self.book.backend_states()

    def show_stopping(self, reason: str) -> None:
        self.run_panel.state = "stopping"
        self.run_panel.message = f"{reason}: finishing the step and saving a checkpoint"

    def _follow_pace(self, plan: Plan | None) -> None:
        """Paint as often as the run's plan leaves CPU for it (pace.py; None: no run trains), and
        say so. Followed here, while this screen handles the event that chose the plan or ended the
        run, so the trace line comes right after that event's own line. The app used to follow it
        when the message had bubbled on to it, and by then this screen could already have handled
        and painted later events (the next epoch, an override): the line landed before or after
        them by thread timing. The app still tells the session (TrainPilotApp._tell_pace)."""
        if self.pace.follow(plan):
            self.show_pace(running=plan is not None)

    def show_pace(self, running: bool) -> None:
        """The app's pace changed for the run's plan: say so where it shows."""
        pace = self.pace
        self.hardware_panel.border_subtitle = f"refresh {pace.interval_s:g} s: all cores train" if pace.busy else ""
        if pace.busy:
            text = f"app refresh every {pace.interval_s:g} s, not {pace.base_s:g} s: the run trains on every core"
        else:
            text = f"app refresh every {pace.interval_s:g} s again: " + ("a core is free" if running else "no run trains")
        self.note(TraceEntry("act", text, "think"))

    def note(self, entry: TraceEntry) -> None:
        """A line in the trace that comes from the app rather than the core (e.g. a crash)."""
        self.agent_panel.add([entry])

    # ---------------------------------------------------------------- handlers

    def _trace(self, event: ev.Event) -> None:
        self.agent_panel.add(entries_for(event))

    def on_utilization_sampled(self, message: msg.UtilizationSampled) -> None:
        self.hardware_panel.sample = message.sample
        self.hardware_panel.history = message.history
        self._paint()  # ride along: one repaint for both panels instead of two

    def on_session_started(self, message: msg.SessionStarted) -> None:
        self._paint(everything=True)  # what waits first: the trace keeps the core's order
        self.run_panel.started = message.event
        self._trace(message.event)

    def on_hardware_observed(self, message: msg.HardwareObserved) -> None:
        self._paint(everything=True)  # what waits first: the trace keeps the core's order
        self.book.update(message.event)
        self.hardware_panel.backends = self.book.backend_states()
        self._trace(message.event)

    def on_agent_stepped(self, message: msg.AgentStepped) -> None:
        self._pace(message)

    def on_backend_chosen(self, message: msg.BackendChosen) -> None:
        self._paint(everything=True)  # what waits first: the trace keeps the core's order
        self.book.update(message.event)
        self.hardware_panel.backends = self.book.backend_states()
        self.run_panel.plan = message.event.plan
        self.run_panel.decision = Decision.of(message.event, self._epoch_now() if self.run_panel.decision else None)
        self.run_panel.remaining_range = (message.event.predicted_low_s, message.event.predicted_high_s)
        self.run_panel.predicted_remaining = message.event.predicted_s
        if self.run_panel.state == "starting":
            self.run_panel.state = "running"
        self._trace(message.event)
        self._follow_pace(message.event.plan)

    def _epoch_now(self) -> int:
        """The epoch in progress: every epoch timed before the event in hand is painted by now."""
        panel = self.run_panel
        done = panel.epochs[-1].epoch if panel.epochs else getattr(panel.started, "resumed_from_epoch", 0) or 0
        return done + 1

    def on_override_refused(self, message: msg.OverrideRefused) -> None:
        self._paint(everything=True)  # what waits first: the trace keeps the core's order
        self._trace(message.event)

    def on_step_progressed(self, message: msg.StepProgressed) -> None:
        # Keep the newest: older steps are never drawn.
        self._progress = message.event
        self._schedule_paint()

    def _pace(self, message: msg.SessionMessage) -> None:
        """Keep a per-epoch message, in order, for the next paint."""
        self._paced.append(message)
        self._schedule_paint()

    def _schedule_paint(self) -> None:
        # The next hardware sample paints (one repaint for all panels); the timer is the fallback
        # when no sample comes (no sampler, or a stalled one), so a run that stalls after this
        # still shows it. After a quiet spell it paints at once: pacing only merges bursts.
        if self._paint_timer is None:
            wait = self._progress_shown_at + 2 * self.progress_interval_s - time.monotonic()
            if wait <= 0:
                self._paint()
            else:
                self._paint_timer = self.set_timer(wait, self._paint)

    def _paint(self, everything: bool = False) -> None:
        """Paint what waits: the per-epoch messages in their order (at most once a figures
        interval, unless `everything`), then the newest step."""
        if self._paint_timer is not None:
            self._paint_timer.stop()
            self._paint_timer = None
        now = time.monotonic()
        figures_due = everything or now >= self._figures_shown_at + self.figures_interval_s
        paced: list[msg.SessionMessage] = []
        if figures_due and self._paced:
            paced, self._paced = self._paced, []
            self._figures_shown_at = now
        progress, self._progress = self._progress, None
        if self._paced:  # figures not due yet: a timer brings them when they are
            self._paint_timer = self.set_timer(self._figures_shown_at + self.figures_interval_s - now, self._paint)
        if not paced and progress is None:
            return
        epochs: list[ev.EpochTimed] = []
        trace: list[TraceEntry] = []
        for message in paced:
            if isinstance(message, msg.EpochTimed):
                epochs.append(message.event)
            elif isinstance(message, msg.AgentStepped):
                self.book.update(message.event)
                self._follow_adaptation(message.event)
            elif isinstance(message, msg.CheckpointSaved) and self.run_panel.state not in ("stopping",):
                self.run_panel.message = f"checkpoint after epoch {message.event.epoch}"
            trace.extend(entries_for(message.event))
        if progress is not None:
            self.run_panel.progress = progress
        if epochs:
            self.run_panel.epochs = (*self.run_panel.epochs, *epochs)
        self.agent_panel.add(trace)  # one mount for the whole batch: one layout, not one per line
        self._progress_shown_at = now

    def _follow_adaptation(self, event: ev.AgentStepped) -> None:
        """The pinned plan line follows what the core says of the closed loop."""
        panel = self.run_panel
        if is_hand_back(event) and panel.decision is not None:
            panel.decision = panel.decision.handed_back()  # a move, if the agent makes one, follows
        elif adaptation_off(event):
            panel.release_key = None

    def on_epoch_timed(self, message: msg.EpochTimed) -> None:
        self._pace(message)

    def on_session_paused(self, message: msg.SessionPaused) -> None:
        self._paint(everything=True)  # what waits, and exactly where it holds
        self.run_panel.state = "paused"
        self._trace(message.event)

    def on_session_resumed(self, message: msg.SessionResumed) -> None:
        self._paint(everything=True)  # what waits first: the trace keeps the core's order
        self.run_panel.state = "running"
        self._trace(message.event)

    def on_checkpoint_saved(self, message: msg.CheckpointSaved) -> None:
        self._pace(message)

    def on_run_finished(self, message: msg.RunFinished) -> None:
        self._paint(everything=True)
        self.run_panel.state = message.event.status
        self.run_panel.message = message.event.message
        self.run_panel.release_key = None  # nothing left to hand back
        self._trace(message.event)
        self._follow_pace(None)  # between runs nothing trains: the app's own rate again

    def on_event_received(self, message: msg.EventReceived) -> None:
        self._paint(everything=True)  # what waits first: the trace keeps the core's order
        self._trace(message.event)

    def on_session_crashed(self, message: msg.SessionCrashed) -> None:
        self._paint(everything=True)  # what waits first: the trace keeps the core's order
        self.run_panel.state = "failed"
        self.run_panel.message = message.error
        self.run_panel.release_key = None
        self.note(TraceEntry("run", f"the session stopped unexpectedly: {message.error}", "failed"))
        self._follow_pace(None)
