"""A run's life in the history: started, checkpointed, finished, or crashed.

A run is written to the history when it starts (status "running", with the pid, host and create
time of the process running it), its row is updated at every checkpoint with the epoch it covers,
and it gets its final status when it ends. A process killed with SIGKILL never ends its row, so a
"running" row is *crashed* when read on its host and no process with that pid and that create time
is alive (comparing the create time tells a reused pid from the run's own process). A row from
another host cannot be checked from here and stays "running".
"""

from __future__ import annotations

import os
import socket
import time
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import psutil

from trainpilot.errors import TrainPilotError

if TYPE_CHECKING:
    from trainpilot.predict.history import History, RunRecord

RUNNING, CRASHED, INTERRUPTED = "running", "crashed", "interrupted"
RESUMABLE = (CRASHED, INTERRUPTED)
CREATE_TIME_SLACK_S = 1.0  # create times are rounded by the OS (jiffies); a reused pid differs by far more


def resume_command(run_id: str) -> str:
    return f"trainpilot headless run --resume {run_id}"


@dataclass(frozen=True)
class ProcessId:
    pid: int
    host: str
    started_at: float | None  # the process's create time (psutil), None where the OS does not say


def this_process() -> ProcessId:
    pid = os.getpid()
    try:
        created: float | None = psutil.Process(pid).create_time()
    except psutil.Error:
        created = None
    return ProcessId(pid, socket.gethostname(), created)


def process_alive(pid: int | None, started_at: float | None) -> bool:
    """Is the process that wrote a row still running? Same pid *and* same create time."""
    if not pid:
        return False
    try:
        process = psutil.Process(pid)
        if process.status() == psutil.STATUS_ZOMBIE:  # killed, not yet reaped by its parent
            return False
        created = process.create_time()
    except psutil.NoSuchProcess:
        return False
    except psutil.AccessDenied:  # it exists and we may not look closer: do not call it crashed
        return True
    return started_at is None or abs(created - started_at) <= CREATE_TIME_SLACK_S


def effective_status(record: RunRecord, host: str | None = None) -> str:
    """The stored status, except that a "running" row of this host whose process is gone is "crashed"."""
    if record.status != RUNNING:
        return record.status
    if (record.host or "") != (host or socket.gethostname()):
        return RUNNING  # another machine's process: nothing here can tell
    return RUNNING if process_alive(record.pid, record.process_started_at) else CRASHED


def checkpoint_exists(run_id: str) -> bool:
    from trainpilot.paths import runs_dir
    from trainpilot.run.checkpoint import LATEST, PREVIOUS

    folder = runs_dir() / run_id
    return (folder / LATEST).is_file() or (folder / PREVIOUS).is_file()


def newest_attempts(records: list[RunRecord]) -> list[RunRecord]:
    """Each run's newest row (a resumed run has one row per attempt), newest run first."""
    seen: set[str] = set()
    out = []
    for rec in records:  # History.records is newest first
        if rec.run_id not in seen:
            seen.add(rec.run_id)
            out.append(rec)
    return out


def last_resumable(history: History) -> str:
    """The run id of the newest run on this host that crashed or was interrupted and still has a
    checkpoint. Raises TrainPilotError (one line) when there is none."""
    host = socket.gethostname()
    for rec in newest_attempts([r for r in history.records() if r.host in (None, host)]):
        if effective_status(rec, host) in RESUMABLE and checkpoint_exists(rec.run_id):
            return rec.run_id
    raise TrainPilotError(
        f"no run to resume: no crashed or interrupted run with a checkpoint in {history.path}"
        " (see `trainpilot headless history`)"
    )


class RunLog:
    """The session's handle on its own history row. Every method is best-effort: a run must not
    fail because its history could not be written (the checkpoint is what resuming needs)."""

    def __init__(self, history: History):
        self.history = history
        self.row_id: int | None = None
        self.notes: list[str] = []
        self._conn: Any = None  # kept open from start to finish: progress is written once an epoch

    def start(self, record: RunRecord) -> None:
        me = this_process()
        try:
            self._close_crashed(record.run_id)
            self.row_id = self.history.start(
                replace(record, started_at=time.time()), pid=me.pid, host=me.host, process_started_at=me.started_at
            )
        except Exception as exc:  # noqa: BLE001 - by contract
            self.notes.append(
                f"could not record the start of run {record.run_id} in the history: {type(exc).__name__}: {exc}"
            )
            return
        try:
            self._conn = self.history.connection()
        except Exception:  # noqa: BLE001 - by contract; progress then opens a connection per write, as it did
            self._conn = None

    def _close_crashed(self, run_id: str) -> None:
        """Resuming a crashed run: its earlier attempt's row says "crashed" for good, so only the
        newest attempt can ever read as running or be resumed again."""
        host = socket.gethostname()
        dead = [
            r.id
            for r in self.history.records()
            if r.run_id == run_id and r.id is not None and effective_status(r, host) == CRASHED
        ]
        if dead:
            self.history.mark(dead, CRASHED)

    def checkpointed(self, epoch: int) -> None:
        if self.row_id is None:
            return
        try:
            self.history.progress(self.row_id, checkpoint_epoch=epoch, conn=self._conn)
        except Exception as exc:  # noqa: BLE001 - by contract
            self.notes.append(f"could not record the checkpoint in the history: {type(exc).__name__}: {exc}")

    def finish(self, record: RunRecord, learn: bool) -> None:
        self.close()
        if self.row_id is None:
            return
        try:
            self.history.finish(self.row_id, record, learn=learn)
        except Exception as exc:  # noqa: BLE001 - by contract
            self.notes.append(
                f"could not record the end of run {record.run_id} in the history: {type(exc).__name__}: {exc}"
            )

    def close(self) -> None:
        """Let go of the progress connection (finish does; so does a run that ends without one)."""
        conn, self._conn = self._conn, None
        if conn is not None:
            try:
                conn.close()
            except Exception:  # noqa: BLE001 - by contract
                pass


def history_of(predictor: Any) -> History | None:
    """The history the agent's cost model learns from (None for a predictor without one)."""
    from trainpilot.predict.history import History

    history = getattr(predictor, "history", None)
    return history if isinstance(history, History) else None
