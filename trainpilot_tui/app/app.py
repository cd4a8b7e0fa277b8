"""TrainPilotApp: runs a training session and the hardware sampler in thread workers and keeps the
control state (is a run streaming, is it paused, what to do once it has stopped).

Workers produce, messages carry, handlers mutate: the session worker iterates
`session.events()` and posts one message per event to the main screen; the screen's handlers update
the panels; the messages then bubble here, where only control state changes. Keys call the session's
thread-safe steering methods (`override_backend`, `release`, `pause`, `resume`, `request_stop`); the
core answers on the event stream, so the screen has one source of truth.
"""
from __future__ import annotations

import gc
import threading
import time
from dataclasses import replace
from functools import partial
from typing import Any, Callable, Iterable, Iterator, Protocol

from textual import work
from textual.app import App, SystemCommand
from textual.binding import Binding
from textual.reactive import reactive
from textual.screen import Screen
from textual.theme import Theme
from textual.worker import Worker, WorkerState, get_current_worker

from trainpilot import events as ev
from trainpilot.errors import TrainPilotError
from trainpilot.machine.monitor import UtilizationSample
from trainpilot.plans import Availability, Plan
from trainpilot.run.session import SessionConfig

from . import messages as msg
from .decision import adaptation_off, is_hand_back
from .pace import Pace
from .sampling import live_samples, stream_samples
from .screens import BackendChooser, ConfirmQuit, MainScreen, RunPicker
from .screens.backend_chooser import Choice
from .themes import DEFAULT_THEME, SHIPPED_THEMES, discover_themes
from .trace import TraceEntry

# Hardware sampling and painting, per second. 1 Hz, as top and nvtop refresh: the app's CPU is
# taken from the training it shows (on a 2-core machine both cores train), and at 2 Hz it used
# more (benchmarks/tui_overhead.py prints it as "UI load"; measured: docs/app.md#the-apps-own-load).
DEFAULT_REFRESH_HZ = 1.0
# After the first screen is drawn, the app waits this long before the run starts, measuring its own
# CPU over the last SETTLE_MEASURE_S of it: start-up work (layout, the first frames, imports on
# first use) then no longer lands in the run's first epochs, and the agent is told the app's
# steady load rather than deciding from a glance at the app still starting (which made it pick
# 1 thread for large_dense where headless picked 2, benchmarks/tui_overhead.py --all).
DEFAULT_SETTLE_S = 1.0
SETTLE_MEASURE_S = 0.75
# One key per backend. Footer space is short at 80 columns, so these are in the command palette,
# the chooser (as hints) and the keys panel, while the footer shows the chooser key.
BACKEND_KEYS = {"cpu": "c", "ane": "a", "mps": "m", "cuda": "g"}
# Hands an overridden (pinned) run back to the agent; in the footer only while that would do something.
RELEASE_KEY = "h"


_frozen = False


def freeze_startup_objects() -> None:
    """Move everything alive now (torch, the model, the data, Textual's widgets) out of the cyclic
    garbage collector's sight, once, when training is about to start. A full collection otherwise
    walks all of it while holding the GIL, a pause during which the training thread cannot run
    (docs/measurements.md#cited-in-the-code-the-app), every few seconds of UI activity. Objects
    made later are collected as usual."""
    global _frozen
    if not _frozen:
        _frozen = True
        gc.freeze()


class Session(Protocol):
    """What the app needs from a session: `trainpilot.run.process.ProcessSession` or
    `trainpilot.run.session.TrainingSession` (tests script their own)."""

    config: SessionConfig
    run_id: str

    def events(self) -> Iterator[ev.Event]: ...
    def override_backend(
        self,
        backend: str,
        threads: int | None = None,
        mode: str | None = None,
        memory_format: str | None = None,
        precision: str | None = None,
    ) -> Availability: ...
    def release(self) -> None: ...
    def pause(self) -> None: ...
    def resume(self) -> None: ...
    def request_stop(self, reason: str = "user") -> None: ...


SessionFactory = Callable[[SessionConfig], Session]
SampleSource = Callable[[threading.Event], Iterable[UtilizationSample]]


def training_session(config: SessionConfig) -> Session:
    """The app's sessions train in a process of their own: in a thread of the app they wait for the
    GIL every time the app draws (trainpilot/session_process.py says how much that cost)."""
    from trainpilot.run.process import ProcessSession

    return ProcessSession(config)


class TrainPilotApp(App[int]):
    TITLE = "TrainPilot"
    CSS_PATH = "app.tcss"
    BINDINGS = [
        Binding("o", "choose_backend", "Override"),
        Binding(RELEASE_KEY, "release", "Hand back"),
        Binding("p", "pause", "Pause"),
        Binding("p", "resume", "Resume"),
        Binding("n", "new_run", "New run"),
        Binding("r", "replan", "Re-plan"),
        Binding("t", "cycle_theme", "Theme"),
        Binding("x", "compress", "Compress", show=False),
        Binding("q", "quit", "Quit"),
        *(Binding(key, f"override('{name}')", name.upper(), show=False) for name, key in BACKEND_KEYS.items()),
    ]

    running: reactive[bool] = reactive(False, bindings=True)  # a session is streaming events
    paused: reactive[bool] = reactive(False, bindings=True)
    stopping: reactive[bool] = reactive(False, bindings=True)
    pinned: reactive[bool] = reactive(False, bindings=True)  # the user's plan: the agent does not move it
    adapting: reactive[bool] = reactive(True, bindings=True)  # the agent may move this run (--adapt on | verify)

    def __init__(
        self,
        config: SessionConfig,
        *,
        theme: str | None = None,
        extra_themes: Iterable[Theme] = (),
        session_factory: SessionFactory = training_session,
        samples: SampleSource | None = None,
        refresh_hz: float | None = None,
        discover_user_themes: bool = True,
        settle_s: float = DEFAULT_SETTLE_S,
    ) -> None:
        """`samples`: a scripted sample source (tests, screenshots); default: the live machine at
        `refresh_hz` (None: DEFAULT_REFRESH_HZ, halved while the run holds every core; a number:
        that rate, whatever the plan). `theme`: a registered theme name (shipped, Textual's, or a user theme file's).
        `settle_s`: how long after its first frame the app lets itself settle before the run
        starts (0: at once, and the session measures the UI's load itself)."""
        super().__init__()
        self.config = config
        self.session_factory = session_factory
        self.sample_source = samples
        self.refresh_hz = refresh_hz if refresh_hz is not None else DEFAULT_REFRESH_HZ
        self.pace = Pace(self.refresh_hz, adaptive=refresh_hz is None)
        self.settle_s = settle_s
        self.ui_steady_cores: float | None = None  # this process's CPU while settled, before any run
        self._settle_mark: tuple[float, float] | None = None
        self._settled_done = settle_s <= 0
        self._waiting: Session | None = None  # made, keys reach it, but it starts once settled
        self.session: Session | None = None
        self._told_interval_s: float | None = None  # the progress interval the session was last told
        self._main = MainScreen(self.pace, release_key=RELEASE_KEY)
        self.last_status: str | None = None  # success | interrupted | failed of the last run
        self._after_stop: SessionConfig | str | None = None  # "quit" or the next run's config
        self.theme_errors: list[str] = []
        self.cycle_names: list[str] = []
        user_themes: list[Theme] = []
        if discover_user_themes:
            user_themes, self.theme_errors = discover_themes()
        for t in (*SHIPPED_THEMES, *user_themes, *extra_themes):
            self.register_theme(t)
            if t.name not in self.cycle_names:
                self.cycle_names.append(t.name)
        self.theme = theme or DEFAULT_THEME

    # ---------------------------------------------------------------- lifecycle

    @property
    def main(self) -> MainScreen:
        return self._main

    def on_mount(self) -> None:
        # Pushed rather than returned from get_default_screen: Textual loads a screen's CSS_PATH
        # when the screen is pushed.
        self.push_screen(self._main)

    def on_main_screen_ready(self) -> None:
        for line in self.theme_errors:
            self.notify(line, title="Theme file skipped", severity="warning", timeout=8)
        self._sample_hardware()
        self.start_session(self.config)
        if self.settle_s > 0:
            self.call_after_refresh(self._settle)

    def _settle(self) -> None:
        """The first screen is drawn: let the start-up work finish, then measure what the app
        costs while it only samples and shows (its steady load), then start the run."""
        wait = max(self.settle_s - SETTLE_MEASURE_S, 0.0)
        if wait > 0:
            self.set_timer(wait, self._begin_settle_measure)
        else:
            self._begin_settle_measure()

    def _begin_settle_measure(self) -> None:
        self._settle_mark = (time.perf_counter(), time.process_time())
        self.set_timer(min(SETTLE_MEASURE_S, self.settle_s), self._settled)

    def _settled(self) -> None:
        if self._settle_mark is not None:
            wall, cpu = time.perf_counter() - self._settle_mark[0], time.process_time() - self._settle_mark[1]
            # the whole process: no run yet, so everything it does is the app's own (the sampler too)
            self.ui_steady_cores = cpu / wall if wall > 0 else None
        self._settled_done = True
        if self._waiting is not None:
            session, self._waiting = self._waiting, None
            self._begin_stream(session)

    def on_unmount(self) -> None:
        # Leaving for any reason other than the confirmed quit (an error, a test harness): the run
        # still stops at a step boundary with a checkpoint, and the worker thread can end.
        if self.session is not None and self.running:
            self.session.request_stop("quit")

    def start_session(self, config: SessionConfig) -> None:
        self.config = config
        self.main.begin_run()
        try:
            session = self.session_factory(config)
        except TrainPilotError as exc:
            self.last_status = "failed"
            self.main.note(TraceEntry("run", f"cannot start: {exc}", "failed"))
            self.notify(str(exc), title="Cannot start the run", severity="error")
            return
        self.session = session
        self.running, self.paused, self.stopping = True, False, False
        self.pinned, self.adapting = False, True
        if self._settled_done:
            self._begin_stream(session)
        else:  # the session exists (pause, stop, override queue up in it); it runs once settled
            self._waiting = session

    def _begin_stream(self, session: Session) -> None:
        expect = getattr(session, "expect_ui_load", None)  # scripted sessions may not take it
        if expect is not None and self.ui_steady_cores is not None:
            expect(self.ui_steady_cores)
        # Progress is painted once a refresh interval: a step event more often than that is one
        # more message to receive and handle (the default 20 a second made the app's own load far
        # larger, taken from the training it shows: docs/measurements.md#cited-in-the-code-the-app).
        pace = getattr(session, "show_progress_every", None)
        if pace is not None:
            self._told_interval_s = self.main.progress_interval_s
            pace(self._told_interval_s)
        self._stream_session(session)

    @work(thread=True, group="session", exclusive=True, exit_on_error=False, name="session")
    def _stream_session(self, session: Session) -> None:
        screen = self.main
        for event in session.events():
            screen.post_message(msg.message_for(event))

    @work(thread=True, group="sampler", exclusive=True, exit_on_error=False, name="sampler")
    def _sample_hardware(self) -> None:
        stop = get_current_worker().cancelled_event
        source = self.sample_source(stop) if self.sample_source else live_samples(lambda: self.pace.interval_s, stop)
        stream_samples(source, self.main.post_message, stop)

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        if event.worker.group == "session" and event.state == WorkerState.ERROR:
            error = event.worker.error
            self.main.post_message(msg.SessionCrashed(f"{type(error).__name__}: {error}"))

    # ---------------------------------------------------------------- control state (bubbled)

    def on_backend_chosen(self, message: msg.BackendChosen) -> None:
        freeze_startup_objects()
        self.pinned = message.event.source == "user"
        self._tell_pace(self.pace.interval_for(message.event.plan))

    def _tell_pace(self, interval_s: float) -> None:
        """Tell the session how often progress is painted on the plan this message chose, when
        that changed. The screen followed the plan (pace.py) as it handled the event, before the
        message bubbled here (MainScreen._follow_pace says why there); the screen may have handled
        later events since, so the interval is the message's plan's, not the pace's now."""
        pace = getattr(self.session, "show_progress_every", None)
        if pace is not None and self.running and interval_s != self._told_interval_s:
            self._told_interval_s = interval_s
            pace(interval_s)

    def on_agent_stepped(self, message: msg.AgentStepped) -> None:
        if is_hand_back(message.event):
            self.pinned = False
        elif adaptation_off(message.event):
            self.adapting = False

    def on_session_paused(self) -> None:
        self.paused = True

    def on_session_resumed(self) -> None:
        self.paused = False

    def on_run_finished(self, message: msg.RunFinished) -> None:
        self._run_ended(message.event.status)

    def on_session_crashed(self) -> None:
        self._run_ended("failed")

    def _run_ended(self, status: str) -> None:
        self.running, self.paused, self.stopping = False, False, False  # the screen has set the app's own pace again
        self.last_status = status
        after, self._after_stop = self._after_stop, None
        if after == "quit":
            self.exit(self.exit_code)
        elif isinstance(after, SessionConfig):
            self.start_session(after)

    @property
    def exit_code(self) -> int:
        """0 unless the last run failed: quitting mid-run is a normal, checkpointed exit."""
        return 1 if self.last_status == "failed" else 0

    def _stop(self, reason: str) -> None:
        assert self.session is not None
        self.stopping = True
        self.main.show_stopping(reason)
        self.session.request_stop(reason)

    # ---------------------------------------------------------------- keys

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        live = self.running and not self.stopping
        if action == "pause":
            return live and not self.paused
        if action == "resume":
            return live and self.paused
        if action in ("choose_backend", "override"):
            return True if live else None  # shown, greyed out, between runs
        if action == "release":
            return live and self.pinned and self.adapting
        return True

    def action_override(
        self,
        backend: str,
        threads: int | None = None,
        mode: str | None = None,
        memory_format: str | None = None,
        precision: str | None = None,
    ) -> None:
        """Move the run to `backend` (for the CPU: `threads`, and `mode="compiled"` for torch.compile;
        `memory_format` "contiguous" | "channels_last" and `precision` "fp32" | "bf16" | "fp16" for
        exactly that plan, None for whichever the agent predicted fastest: the direct keys)."""
        if self.session is None or not self.running or self.stopping:
            self.notify("No run in progress.", severity="warning")
            return
        current = self.main.book.current
        target = Plan(backend, threads=threads, mode=mode).with_settings(memory_format, precision)  # defaults: None
        # What was not asked for (threads, a setting: None) matches any; `c` (no threads, no mode)
        # on a compiled plan means "eager CPU": a move, not a no-op.
        if (
            current is not None
            and current.backend == backend
            and (threads is None or threads == current.threads)
            and mode == current.mode
            and (memory_format is None or target.memory_format == current.memory_format)
            and (precision is None or target.precision == current.precision)
        ):
            self.notify(f"Already training on {current.short_label}.")
            return
        # the settings only when asked for: a direct key leaves them to the core
        asked = (("memory_format", memory_format), ("precision", precision))
        settings = {name: value for name, value in asked if value is not None}
        verdict = self.session.override_backend(backend, threads, mode, **settings)
        if not verdict:
            # The core also answers with OverrideRefused, which puts the reason in the trace.
            self.notify(f"{backend}: {verdict.reason}", title="Override refused", severity="warning")
            return
        named = threads or mode or target.memory_format or target.precision
        self.notify(f"Moving to {target.short_label if named else backend} at the next step boundary.", title="Override")

    def action_choose_backend(self) -> None:
        if not self.running or self.stopping:
            return

        def chosen(choice: Choice | None) -> None:
            if choice is not None:
                self.action_override(*choice)

        self.push_screen(BackendChooser(self.main.book.plan_options(), self.main.book.current, BACKEND_KEYS), chosen)

    def action_release(self) -> None:
        """Hand an overridden run back to the agent: at the next step boundary it decides again and
        moves the run when that pays; the core says so on the event stream."""
        if self.session is None or not self.running or self.stopping:
            return
        self.session.release()
        self.notify("The agent decides again at the next step boundary.", title="Handed back")

    def action_pause(self) -> None:
        if self.session is not None:
            self.session.pause()

    def action_resume(self) -> None:
        if self.session is not None:
            self.session.resume()

    def action_new_run(self) -> None:
        def chosen(config: SessionConfig | None) -> None:
            if config is not None:
                self.restart(config, "new run")

        self.push_screen(RunPicker(self.config), chosen)

    def action_replan(self) -> None:
        """Observe and plan again. Mid-run, the run stops at a step with a checkpoint and resumes
        from it under a fresh plan; between runs, the same job runs again (the agent now has the
        last run in its history)."""
        if self.session is not None and self.running:
            self.restart(replace(self.session.config, resume=self.session.run_id, run_id=None), "re-plan")
        else:
            self.restart(replace(self.config, resume=None, run_id=None), "re-plan")

    def restart(self, config: SessionConfig, reason: str) -> None:
        if self.running:
            self._after_stop = config
            if not self.stopping:
                self._stop(reason)
        else:
            self.start_session(config)

    def action_compress(self) -> None:
        """Open the compression view for this run's model and dataset (or its job). A training run pauses
        first: the view measures step times, and a run beside them would skew every figure."""
        from trainpilot.compress import CompressConfig

        from .screens import CompressionScreen
        from .screens.run_picker import model_name

        paused_here = self.running and not self.paused and self.session is not None
        if paused_here:
            self.session.pause()  # type: ignore[union-attr]
        config = CompressConfig(model=model_name(self.config), dataset=self.config.dataset, job=self.config.job)
        self.push_screen(CompressionScreen(config), callback=lambda _r: self.action_resume() if paused_here else None)

    def action_cycle_theme(self) -> None:
        names = self.cycle_names
        index = names.index(self.theme) + 1 if self.theme in names else 0
        self.theme = names[index % len(names)]
        self.notify(f"Theme: {self.theme}", timeout=2)

    async def action_quit(self) -> None:
        """Quit; mid-run, ask first, then stop at a step boundary, checkpoint, and exit once the
        core has confirmed with RunFinished."""
        if not self.running:
            self.exit(self.exit_code)
            return
        if self.stopping and self._after_stop == "quit":
            return

        def answered(yes: bool | None) -> None:
            if yes and self.running:
                self._after_stop = "quit"
                if not self.stopping:
                    self._stop("quit")
                self.notify("Stopping after this step and saving a checkpoint…", title="Quitting")
            elif yes:
                self.exit(self.exit_code)

        self.push_screen(ConfirmQuit(self.session.run_id if self.session else None), answered)

    # ---------------------------------------------------------------- command palette

    def get_system_commands(self, screen: Screen[Any]) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        if self.running and not self.stopping:
            if self.pinned and self.adapting:
                why = f"It decides again and moves the run when that pays ({RELEASE_KEY})"
                yield SystemCommand("Hand the run back to the agent", why, self.action_release)
            yield SystemCommand("Override backend…", "Pick the plan to move the run to, with each plan's prediction (o)", self.action_choose_backend)
            for name, key in BACKEND_KEYS.items():
                yield SystemCommand(f"Override: move the run to {name}", f"Applies at the next step boundary ({key})", partial(self.action_override, name))
            if self.paused:
                yield SystemCommand("Resume training", "Continue from the step where it paused (p)", self.action_resume)
            else:
                yield SystemCommand("Pause training", "Hold at the next step boundary (p)", self.action_pause)
        yield SystemCommand("New run…", "Pick a model and a dataset and start again (n)", self.action_new_run)
        yield SystemCommand("Re-plan", "Observe and plan again; a running job resumes from its checkpoint (r)", self.action_replan)
        yield SystemCommand("Compress the model…", "Prune it for this machine: a TD3 agent picks each layer's sparsity (x)", self.action_compress)
        yield SystemCommand("Cycle theme", f"Switch between {', '.join(self.cycle_names)} (t)", self.action_cycle_theme)
