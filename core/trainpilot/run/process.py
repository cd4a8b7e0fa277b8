"""A training session in a process of its own, streamed and steered like one in this process.

Why: the terminal app and a session in one of its threads share one GIL. Every frame the app lays
out and draws holds it, and a model whose step is mostly Python (mlp, rnn) waits that long each
time: `benchmarks/tui_overhead.py --model mlp` measured the app's run far slower than headless
with the session in a thread (docs/app.md#the-apps-own-load). In a process of its own the session
competes with the app for a core at most, which the agent sees and plans for (the app's process
counts as its UI load, predict.contention.count_as_ui).

`ProcessSession` has the steering methods and the event stream of `session.TrainingSession`; the
session itself runs in a spawned child (spawn, not fork: the app has threads, and a forked child
would inherit locks they hold). Two pipes:

    events   child -> parent: every event, pickled (they are frozen dataclasses), then None
    control  parent -> child: ("start", ui_cores) | ("pause" | "resume" | "release" | "stop", reason) |
             ("progress", seconds) | ("override", (backend, threads, mode, memory_format, precision)), answered with
             ("ok", Availability)

When the parent goes away (quit, crash, kill -9), the child reads end-of-file on the control pipe
and stops the run at the next step boundary with a checkpoint, as a quit would: nothing is lost
that a headless run would keep. The child's stdout and stderr go to a log file (a warning printed
to the terminal would scribble over the app's screen); a child that dies says where that log is.
"""

from __future__ import annotations

import atexit
import contextlib
import multiprocessing
import os
import threading
import weakref
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

from trainpilot import events as ev
from trainpilot.errors import TrainPilotError
from trainpilot.plans import Availability

# After the last event, how long the child may take to exit before it is called hung.
EXIT_WAIT_S = 30.0
# At interpreter exit, how long a child asked to stop may take to reach a step boundary and write its
# checkpoint before it is terminated.
STOP_WAIT_S = 60.0


class SessionProcessDied(TrainPilotError):
    """The training process ended without finishing its run (killed, out of memory, a crash in C)."""


class ProcessSession:
    """`TrainingSession(config, dataset=dataset)` run in a child process. `ui_pid`: the process
    whose CPU the child counts as its UI's load (default: this one, the caller's)."""

    def __init__(self, config: Any, dataset: Any = None, *, ui_pid: int | None = None):
        from trainpilot.run.session import new_run_id, with_default_epochs

        config = with_default_epochs(config)
        self.run_id: str = config.run_id or new_run_id()
        # the child names the run with the same id, so a key pressed before its first event (quit:
        # "run X is checkpointed") means the run the child trains
        self.config = replace(config, run_id=self.run_id) if not config.resume else config
        self.finished: ev.RunFinished | None = None
        self.log_path = _log_path(self.run_id)
        self._ui_steady: float | None = None
        self._lock = threading.Lock()  # one control exchange at a time (the app's thread and the worker's)
        ctx = multiprocessing.get_context("spawn")
        self._events, child_events = ctx.Pipe(duplex=False)
        self._control, child_control = ctx.Pipe()
        self._process = ctx.Process(
            target=_serve,
            name=f"trainpilot-session-{self.run_id}",
            daemon=False,
            args=(self.config, dataset, child_events, child_control, ui_pid or os.getpid(), str(self.log_path)),
        )
        with _real_stderr():
            self._process.start()
        # the parent keeps only its own ends: when the child dies, reads here see end-of-file
        child_events.close()
        child_control.close()
        _LIVE.add(self)

    # ---------------------------------------------------------------- steering (any thread)

    def expect_ui_load(self, cores: float) -> None:
        """The caller's UI's steady load (cores); told to the child's session when the run starts."""
        self._ui_steady = max(float(cores), 0.0)

    def show_progress_every(self, seconds: float) -> None:
        """As TrainingSession's: step progress at most once in `seconds` (fewer events to pickle,
        send, receive and handle, for a caller that paints no more often than that)."""
        self._tell("progress", max(float(seconds), 0.0))

    def override_backend(
        self,
        backend: str,
        threads: int | None = None,
        mode: str | None = None,
        memory_format: str | None = None,
        precision: str | None = None,
    ) -> Availability:
        answer = self._ask("override", (backend, threads, mode, memory_format, precision))
        return answer if isinstance(answer, Availability) else Availability(False, "the training process has ended")

    def pause(self) -> None:
        self._tell("pause", None)

    def resume(self) -> None:
        self._tell("resume", None)

    def release(self) -> None:
        """Hand an overridden (pinned) run back to the agent (as TrainingSession's)."""
        self._tell("release", None)

    def request_stop(self, reason: str = "user") -> None:
        """Finish the current step, checkpoint, and end the run as interrupted (as TrainingSession's)."""
        self._tell("stop", reason)

    @property
    def pid(self) -> int | None:
        return self._process.pid

    # ---------------------------------------------------------------- the stream

    def events(self) -> Iterator[ev.Event]:
        """The child's events as it sends them; the run starts with the first call."""
        self._tell("start", self._ui_steady)
        while True:
            try:
                event = self._events.recv()
            except (EOFError, OSError):  # the child is gone without its end marker
                break
            if event is None:
                break
            if isinstance(event, ev.SessionStarted):
                self.run_id = event.run_id  # a resumed run keeps the id it had
            elif isinstance(event, ev.RunFinished):
                self.finished = event
            yield event
        self._process.join(EXIT_WAIT_S)
        _LIVE.discard(self)
        if self.finished is None:
            code = self._process.exitcode
            how = f"killed by signal {-code}" if code is not None and code < 0 else f"exit code {code}"
            raise SessionProcessDied(
                f"the training process ended before its run finished ({how}); its output: {self.log_path}."
                f" `trainpilot headless run --resume last` continues from the last checkpoint"
            )

    def _tell(self, command: str, value: Any) -> None:
        with self._lock:
            try:
                self._control.send((command, value))
            except (OSError, ValueError):  # the child has ended (or the pipe was closed): nothing to steer
                pass

    def _ask(self, command: str, value: Any) -> Any:
        with self._lock:
            try:
                self._control.send((command, value))
                status, answer = self._control.recv()
            except (OSError, EOFError, ValueError):
                return None
        if status != "ok":
            raise TrainPilotError(f"the training process refused '{command}': {answer}")
        return answer

    def _stop_at_exit(self) -> None:
        if self._process.is_alive():
            self.request_stop("quit")
            self._process.join(STOP_WAIT_S)
            if self._process.is_alive():
                self._process.terminate()


# Sessions whose child may still run. At interpreter exit each is asked to stop and given time to
# checkpoint (registered after multiprocessing's own exit hook, so it runs first: that one would
# wait for a child that nobody asked to stop).
_LIVE: weakref.WeakSet[ProcessSession] = weakref.WeakSet()


@atexit.register
def _stop_live_sessions() -> None:
    for session in list(_LIVE):
        session._stop_at_exit()


@contextlib.contextmanager
def _real_stderr() -> Iterator[None]:
    """Starting the first child also starts multiprocessing's resource tracker, which hands it
    `sys.stderr.fileno()`; under the terminal app sys.stderr is the app's capture, whose descriptor
    is no real one (`ValueError: bad value(s) in fds_to_keep`). The process's own stderr it is."""
    import sys

    captured = sys.stderr
    if sys.__stderr__ is not None:
        sys.stderr = sys.__stderr__
    try:
        yield
    finally:
        sys.stderr = captured


def _log_path(run_id: str) -> Path:
    from trainpilot.paths import data_home

    folder = data_home() / "logs"
    folder.mkdir(parents=True, exist_ok=True)
    return folder / f"session-{run_id}.log"


# ---------------------------------------------------------------- the child


class _State:
    def __init__(self) -> None:
        self.start = threading.Event()
        self.abandoned = False  # told to stop (or orphaned) before the run started: do not start it


def _serve(config: Any, dataset: Any, events: Any, control: Any, ui_pid: int, log_path: str) -> None:
    """The child's main: build the session, wait for "start", send every event, then None."""
    _output_to(log_path)
    from trainpilot.machine.contention import count_as_ui
    from trainpilot.run.session import TrainingSession

    count_as_ui(ui_pid)
    session = TrainingSession(config, dataset=dataset)
    state = _State()
    threading.Thread(target=_obey, args=(session, control, state), name="trainpilot-control", daemon=True).start()
    state.start.wait()
    if state.abandoned:
        return
    connected = True
    for event in session.events():
        if not connected:
            continue
        try:
            events.send(event)
        except (OSError, ValueError):  # the parent is gone: end the run at a step boundary, checkpointed
            connected = False
            session.request_stop("quit")
    if connected:
        try:
            events.send(None)
        except (OSError, ValueError):
            pass


def _obey(session: Any, control: Any, state: _State) -> None:
    """The child's control thread: apply each command to the session; end-of-file = the parent left."""
    while True:
        try:
            command, value = control.recv()
        except (EOFError, OSError):
            session.request_stop("quit")
            state.abandoned = not state.start.is_set()
            state.start.set()
            return
        if command == "start":
            if value is not None:
                session.expect_ui_load(value)
            state.start.set()
        elif command == "stop":
            session.request_stop(value)
            if not state.start.is_set():
                state.abandoned = True
                state.start.set()
        elif command == "progress":
            session.show_progress_every(value)
        elif command == "pause":
            session.pause()
        elif command == "resume":
            session.resume()
        elif command == "release":
            session.release()
        elif command == "override":
            try:
                reply: tuple[str, Any] = ("ok", session.override_backend(*value))
            except Exception as exc:  # noqa: BLE001 - the answer goes back to the caller, as a local call's would
                reply = ("error", f"{type(exc).__name__}: {exc}")
            try:
                control.send(reply)
            except (OSError, ValueError):
                pass


def _output_to(log_path: str) -> None:
    """Send this process's stdout and stderr, at the descriptor level (C++ warnings too), to the log."""
    import sys

    fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    for stream, number in ((sys.stdout, 1), (sys.stderr, 2)):
        try:
            stream.flush()
        except (AttributeError, OSError, ValueError):
            pass
        os.dup2(fd, number)
    os.close(fd)
    sys.stdout = open(1, "w", buffering=1, closefd=False)
    sys.stderr = open(2, "w", buffering=1, closefd=False)
