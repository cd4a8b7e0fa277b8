"""The Run panel: what is training where, progress with the ETA from the prediction, and per-epoch
loss, accuracy and predicted vs actual time (table and chart).

The plan and who chose it (decision.py) has a line of its own under the status line, outside the
part that scrolls, so it stays on screen however long the run and the trace grow.

Reactive state only; the screen's message handlers set it.
"""
from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Container, Horizontal, Vertical
from textual.content import Content
from textual.reactive import reactive
from textual.widgets import ProgressBar

from trainpilot import events as ev
from trainpilot.plans import Plan

from .. import format as fmt
from ..decision import Decision, plan_line
from ..styles import tcss_beside
from .epoch_table import EpochTable
from .pva_chart import PvaChart
from .readout import Readout

STATUS_STYLE = {
    "starting": "$text-muted",
    "running": "$success",
    "paused": "bold $warning",
    "stopping": "bold $warning",
    "interrupted": "bold $warning",
    "success": "bold $success",
    "failed": "bold $error",
}


class RunPanel(Vertical):
    DEFAULT_CSS = tcss_beside(__file__)
    SCOPED_CSS = False

    started: reactive[ev.SessionStarted | None] = reactive(None, repaint=False)
    progress: reactive[ev.StepProgressed | None] = reactive(None, repaint=False)
    plan: reactive[Plan | None] = reactive(None, repaint=False)  # in effect; the plan line draws `decision`
    predicted_remaining: reactive[float | None] = reactive(None, repaint=False)
    remaining_range: tuple[float | None, float | None] = (None, None)  # its 80 % interval, set with it
    epochs: reactive[tuple[ev.EpochTimed, ...]] = reactive(tuple, repaint=False)
    state: reactive[str] = reactive("starting", repaint=False)
    message: reactive[str] = reactive("", repaint=False)
    decision: reactive[Decision | None] = reactive(None, repaint=False)
    release_key: reactive[str | None] = reactive(None, repaint=False)  # None: handing back does nothing

    def compose(self) -> ComposeResult:
        with Horizontal(id="progress-row"):
            yield Readout(id="epoch-label")
            yield ProgressBar(total=None, show_eta=False, show_percentage=False, id="step-bar")
            yield Readout(id="step-label")
        yield Readout(id="run-status")
        yield Readout(id="run-plan")
        with Container(id="pva"):
            yield EpochTable(id="epoch-table")
            yield PvaChart(id="pva-chart")

    def on_mount(self) -> None:
        self.border_title = "Run"
        self._epoch_label, self._step_label, self._status, self._plan_line = (
            self.query_one(f"#{name}", Readout) for name in ("epoch-label", "step-label", "run-status", "run-plan")
        )
        self._bar = self.query_one("#step-bar", ProgressBar)
        self._show_progress()
        self._show_status()
        self._show_plan()

    def reset(self) -> None:
        """A new session starts: forget the previous run's figures."""
        self.started = None
        self.progress = None
        self.plan = None
        self.predicted_remaining = None
        self.epochs = ()
        self.state = "starting"
        self.message = ""
        self.decision = None

    # ---------------------------------------------------------------- watchers

    def watch_started(self, started: ev.SessionStarted | None) -> None:
        # What runs goes in the border, so the panel's lines go to progress and results.
        self._show_status()
        if started is None:
            self.border_title, self.border_subtitle = "Run", ""
            return
        # the job's metric names the table's columns (events that do not carry it: the zoo's accuracy)
        self.query_one(EpochTable).metric = getattr(started, "metric", None) or "accuracy"
        resumed = f", resumed at epoch {started.resumed_from_epoch + 1}" if started.resumed_from_epoch else ""
        self.border_title = f"Run: {started.model} on {started.dataset}"
        self.border_subtitle = f"{started.train_samples} train / {started.val_samples} val · run {started.run_id}{resumed}"
        self._show_progress()

    def watch_progress(self) -> None:
        self._show_progress()
        self._show_status()

    def watch_epochs(self, epochs: tuple[ev.EpochTimed, ...]) -> None:
        self.query_one(EpochTable).show(epochs)
        self.query_one(PvaChart).epochs = epochs
        self._show_status()

    def on_resize(self) -> None:
        self.call_after_refresh(self._show_plan)  # the plan line's own width is known once laid out

    def watch_decision(self) -> None:
        self._show_plan()

    def watch_release_key(self) -> None:
        self._show_plan()

    def watch_predicted_remaining(self) -> None:
        self._show_status()

    def watch_state(self) -> None:
        self._show_status()
        self._show_progress()

    def watch_message(self) -> None:
        self._show_status()

    # ---------------------------------------------------------------- rendering

    def _show_progress(self) -> None:
        epochs = self.started.epochs if self.started else None
        p = self.progress
        if p is None:
            done = len(self.epochs)
            self._epoch_label.update(f"Epoch {min(done + 1, epochs)}/{epochs}" if epochs else "Epoch –")
            self._step_label.update("")
            return
        self._epoch_label.update(f"Epoch {p.epoch}/{epochs or '?'}")
        self._bar.update(total=p.steps_per_epoch, progress=p.step)
        self._step_label.update(f"{p.step}/{p.steps_per_epoch}")

    def _show_status(self) -> None:
        """One line, most important first: state, ETA, loss, then the latest note (the plan has
        its own line)."""
        parts: list[Content | str | tuple[str, str]] = [(self.state, STATUS_STYLE.get(self.state, ""))]
        if self.state == "starting":
            doing = "the agent observes the machine and plans (trace below)" if self.started else "loading the model and the data"
            parts.append((f": {doing}", "$text-muted"))
        p = self.progress
        if self.state in ("running", "paused"):
            eta, (low, high) = (p.eta_s, (p.eta_low_s, p.eta_high_s)) if p is not None else (self.predicted_remaining, self.remaining_range)
            if eta is not None:
                parts += [" · ETA ", (fmt.seconds_range(eta, low, high), "bold")]
        if p is not None:
            parts.append(f" · loss {p.loss:.3f}")
        if self.message:
            parts.append((f" · {self.message}", "$text-muted"))
        self._status.update(Content.assemble(*parts))

    def _show_plan(self) -> None:
        width = self._plan_line.content_size.width or None  # before the first layout: the full form
        self._plan_line.update(plan_line(self.decision, self.release_key, width))
