"""The one screen: Hardware, Run and Agent panels, and the footer with the keys.

Session and sampler workers post their messages here. Each handler sets reactive state on a panel
or appends to the trace, nothing else; the messages then bubble on to the app, which keeps the
control state (running, paused, what to do when a run stops).
"""
from __future__ import annotations

import time

from textual.app import ComposeResult
from textual.message import Message
from textual.screen import Screen
from textual.timer import Timer
from textual.widgets import Footer

from trainpilot import events as ev

from .. import messages as msg
from ..plan_book import PlanBook
from ..trace import TraceEntry, entries_for
from ..widgets import AgentPanel, HardwarePanel, RunPanel


class MainScreen(Screen[None]):
    CSS_PATH = "main.tcss"
    # Responsive classes on the screen: the .tcss files switch layouts on them.
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (120, "-wide")]

    class Ready(Message):
        """The panels exist: the app may start streaming into them."""

    def __init__(self, progress_interval_s: float = 0.5) -> None:
        """`progress_interval_s`: the hardware refresh interval; step progress is repainted with
        each sample, or after twice this when no sample comes. The core sends up to 20 steps a
        second; every repaint is main-thread work that competes with the training thread for the
        GIL (benchmarks/tui_overhead.py), and the bar reads as smoothly at the refresh rate."""
        super().__init__()
        self.progress_interval_s = progress_interval_s
        self.book = PlanBook()
        self._progress: ev.StepProgressed | None = None  # newest, not yet shown
        self._progress_shown_at = float("-inf")
        self._progress_timer: Timer | None = None

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
        self.book = PlanBook(availability=dict(self.book.availability))
        self.run_panel.reset()
        self.hardware_panel.backends = self.book.backend_states()

    def show_stopping(self, reason: str) -> None:
        self.run_panel.state = "stopping"
        self.run_panel.message = f"{reason}: finishing the step and saving a checkpoint"

    def note(self, entry: TraceEntry) -> None:
        """A line in the trace that comes from the app rather than the core (e.g. a crash)."""
        self.agent_panel.add([entry])

    # ---------------------------------------------------------------- handlers

    def _trace(self, event: ev.Event) -> None:
        self.agent_panel.add(entries_for(event))

    def on_utilization_sampled(self, message: msg.UtilizationSampled) -> None:
        self.hardware_panel.sample = message.sample
        self.hardware_panel.history = message.history
        self._show_progress()  # ride along: one repaint for both panels instead of two

    def on_session_started(self, message: msg.SessionStarted) -> None:
        self.run_panel.started = message.event
        self._trace(message.event)

    def on_hardware_observed(self, message: msg.HardwareObserved) -> None:
        self.book.update(message.event)
        self.hardware_panel.backends = self.book.backend_states()
        self._trace(message.event)

    def on_agent_stepped(self, message: msg.AgentStepped) -> None:
        self.book.update(message.event)
        self._trace(message.event)

    def on_backend_chosen(self, message: msg.BackendChosen) -> None:
        self.book.update(message.event)
        self.hardware_panel.backends = self.book.backend_states()
        self.run_panel.plan = message.event.plan
        self.run_panel.remaining_range = (message.event.predicted_low_s, message.event.predicted_high_s)
        self.run_panel.predicted_remaining = message.event.predicted_s
        if self.run_panel.state == "starting":
            self.run_panel.state = "running"
        self._trace(message.event)

    def on_override_refused(self, message: msg.OverrideRefused) -> None:
        self._trace(message.event)

    def on_step_progressed(self, message: msg.StepProgressed) -> None:
        # Keep the newest. The next hardware sample shows it (one repaint for both panels); the
        # timer is the fallback when no sample comes (no sampler, or a stalled one), so a run that
        # stalls after this step still shows it.
        self._progress = message.event
        if self._progress_timer is None:
            wait = self._progress_shown_at + 2 * self.progress_interval_s - time.monotonic()
            if wait <= 0:
                self._show_progress()
            else:
                self._progress_timer = self.set_timer(wait, self._show_progress)

    def _show_progress(self) -> None:
        if self._progress_timer is not None:
            self._progress_timer.stop()
            self._progress_timer = None
        if self._progress is not None:
            self.run_panel.progress = self._progress
            self._progress = None
            self._progress_shown_at = time.monotonic()

    def on_epoch_timed(self, message: msg.EpochTimed) -> None:
        self._show_progress()  # the epoch's last step, before its result
        self.run_panel.epochs = (*self.run_panel.epochs, message.event)
        self._trace(message.event)

    def on_session_paused(self, message: msg.SessionPaused) -> None:
        self._show_progress()  # exactly where it holds
        self.run_panel.state = "paused"
        self._trace(message.event)

    def on_session_resumed(self, message: msg.SessionResumed) -> None:
        self.run_panel.state = "running"
        self._trace(message.event)

    def on_checkpoint_saved(self, message: msg.CheckpointSaved) -> None:
        if self.run_panel.state not in ("stopping",):
            self.run_panel.message = f"checkpoint after epoch {message.event.epoch}"
        self._trace(message.event)

    def on_run_finished(self, message: msg.RunFinished) -> None:
        self._show_progress()
        self.run_panel.state = message.event.status
        self.run_panel.message = message.event.message
        self._trace(message.event)

    def on_event_received(self, message: msg.EventReceived) -> None:
        self._trace(message.event)

    def on_session_crashed(self, message: msg.SessionCrashed) -> None:
        self.run_panel.state = "failed"
        self.run_panel.message = message.error
        self.note(TraceEntry("run", f"the session stopped unexpectedly: {message.error}", "failed"))
