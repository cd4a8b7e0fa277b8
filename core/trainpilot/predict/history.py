"""The run history: every run's workload, plan, load, predicted and actual time, in SQLite.

A run is in the history from its start (status "running", with the pid, host and start time of its
process), its row is updated at every checkpoint and gets its final status when it ends, so a run
killed with SIGKILL is still found (`runlog.effective_status` tells "crashed" from "running").

Several TrainPilot processes may finish runs at the same moment, so the database runs in WAL mode
(readers never block the writer) with a busy timeout, and every write is retried with backoff when
SQLite still reports the file locked. A file that is not a database, or that a newer TrainPilot
wrote (schema version above ours), is set aside under a new name with a message, and a fresh
history starts: losing the learned corrections costs a few runs of accuracy, a crash costs the run.
"""

from __future__ import annotations

import json
import logging
import math
import os
import random
import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

from trainpilot.plans import Plan

SCHEMA_VERSION = 1
LOG = logging.getLogger("trainpilot.predict")
T = TypeVar("T")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id TEXT NOT NULL,
    recorded_at REAL NOT NULL,
    machine_id TEXT NOT NULL,
    footprint TEXT NOT NULL,
    model TEXT NOT NULL,
    params INTEGER NOT NULL,
    flops_per_sample REAL NOT NULL,
    dataset_size INTEGER NOT NULL,
    batch_size INTEGER NOT NULL,
    profile_json TEXT NOT NULL,
    backend TEXT NOT NULL,
    threads INTEGER,
    device TEXT,
    mode TEXT,
    busy_cores REAL NOT NULL,
    cpu_percent REAL NOT NULL,
    predicted_s REAL,
    actual_s REAL NOT NULL,
    status TEXT NOT NULL,
    epochs INTEGER NOT NULL,
    epochs_done INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS runs_by_machine ON runs (machine_id, footprint, backend, threads);
"""
# Columns added after schema 1, each with ALTER TABLE ADD COLUMN when a database lacks it (on
# every open, not by a version bump), so an older file keeps working (its runs read back with
# NULL or the default there) and an older TrainPilot still reads and writes a newer file (it
# selects and inserts the columns it knows by name; a bump would make it set the file aside).
ADDED_COLUMNS = {
    "energy_j": "REAL",  # joules of the run's training steps (energy/meter.py)
    "energy_source": "TEXT",  # "measured: RAPL package", "est.: ...": never a figure without it
    "pid": "INTEGER",  # the process that runs it (lifecycle rows only)
    "host": "TEXT",  # where that process runs: liveness can only be checked there
    "process_started_at": "REAL",  # the process's create time: a reused pid is another process
    "started_at": "REAL",  # when the run (this attempt) started
    "checkpoint_epoch": "INTEGER",  # epochs covered by its last checkpoint
    "learn": "INTEGER NOT NULL DEFAULT 1",  # 0: a finished run the cost model must not learn from
    "ui_cores": "REAL",  # of busy_cores, what this process's own UI used (contention.ExternalCpuMeter)
    "loader_workers": "INTEGER",  # the plan's DataLoader workers (NULL: batches loaded in the training process)
    "memory_format": "TEXT",  # the plan's layout (NULL: PyTorch's default, contiguous)
    "precision": "TEXT",  # the plan's mixed precision (NULL: fp32)
}


@dataclass(frozen=True)
class RunRecord:
    run_id: str
    recorded_at: float
    machine_id: str
    footprint: str
    profile: dict[str, Any]  # the workload profile's to_dict() (model, params, FLOPs, bytes, sizes)
    plan: Plan
    busy_cores: float
    cpu_percent: float
    predicted_s: float | None
    actual_s: float
    status: (
        str  # running (as stored while it runs; see runlog.effective_status) | success | failed | interrupted | crashed
        # | phase (a load phase of a run the closed loop moved: learnt from, not listed as a run)
    )
    epochs: int  # planned
    epochs_done: int
    id: int | None = None
    energy_j: float | None = None
    energy_source: str | None = None
    pid: int | None = None
    host: str | None = None
    process_started_at: float | None = None
    started_at: float | None = None
    checkpoint_epoch: int | None = None
    learn: bool = True
    ui_cores: float | None = None  # part of busy_cores: TrainPilot's own UI (None: recorded before it was measured)

    @property
    def model(self) -> str:
        return str(self.profile.get("model", "?"))

    @property
    def error(self) -> float | None:
        """Signed relative error of the prediction made before the run: predicted/actual - 1."""
        if self.predicted_s is None or self.actual_s <= 0:
            return None
        return self.predicted_s / self.actual_s - 1.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "run_id": self.run_id,
            "recorded_at": self.recorded_at,
            "machine_id": self.machine_id,
            "footprint": self.footprint,
            "model": self.model,
            "plan": self.plan.to_dict(),
            "plan_label": self.plan.label,
            "busy_cores": self.busy_cores,
            "cpu_percent": self.cpu_percent,
            "predicted_s": self.predicted_s,
            "actual_s": self.actual_s,
            "error": self.error,
            "status": self.status,
            "epochs": self.epochs,
            "epochs_done": self.epochs_done,
            "dataset_size": self.profile.get("dataset_size"),
            "batch_size": self.profile.get("batch_size"),
            "energy_j": self.energy_j,
            "energy_source": self.energy_source,
            "pid": self.pid,
            "host": self.host,
            "started_at": self.started_at,
            "checkpoint_epoch": self.checkpoint_epoch,
            "ui_cores": self.ui_cores,
        }


class HistoryUnavailable(Exception):
    """The history could not be opened or written even after setting a damaged file aside."""


class History:
    """The run history at `path` (default: `paths.history_db_path()`)."""

    def __init__(self, path: Path | str, *, timeout_s: float = 30.0, notify: Callable[[str], None] | None = None):
        self.path = Path(path)
        self.timeout_s = timeout_s
        self.notices: list[str] = []  # messages for the user (a file set aside, ...)
        self._notify = notify
        self._open()

    # ---------------------------------------------------------------- opening

    def _connect(self) -> sqlite3.Connection:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(str(self.path), timeout=self.timeout_s, isolation_level=None)
        # A damaged file can hand back bytes that are not UTF-8 (in quick_check's report, say):
        # decode leniently so damage is diagnosed and set aside instead of raising mid-check.
        conn.text_factory = lambda raw: raw.decode("utf-8", "replace")
        conn.execute(f"PRAGMA busy_timeout = {int(self.timeout_s * 1000)}")
        # In WAL mode NORMAL still never corrupts the file; a power cut may lose the last run
        # or two, which is a fair price for not waiting on fsync at every run's end.
        conn.execute("PRAGMA synchronous = NORMAL")
        return conn

    def _open(self) -> None:
        for attempt in range(2):
            try:
                conn = self._connect()
                try:
                    # bound now: _retry calls it before this iteration's conn closes
                    self._retry(partial(self._init_schema, conn))
                finally:
                    conn.close()
                return
            except _SetAside as why:
                if attempt:
                    raise HistoryUnavailable(f"{self.path}: {why}") from None
                self._set_aside(str(why))
            except (sqlite3.DatabaseError, UnicodeDecodeError) as exc:  # "not a database", "malformed", garbled text
                if attempt:
                    raise HistoryUnavailable(f"{self.path}: {exc}") from exc
                self._set_aside(f"unreadable ({exc})")

    def _init_schema(self, conn: sqlite3.Connection) -> None:
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        if version > SCHEMA_VERSION:
            raise _SetAside(
                f"written by a newer TrainPilot (history schema {version}, this one reads {SCHEMA_VERSION})"
            )
        # A quick structural check: a truncated or overwritten file fails here, not mid-run.
        check = conn.execute("PRAGMA quick_check").fetchone()[0]
        if check != "ok":
            raise _SetAside(f"damaged ({check})")
        mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
        if str(mode).lower() != "wal":  # e.g. a network file system: still correct, just slower
            LOG.info("history %s: journal mode %s (WAL unavailable)", self.path, mode)
        if version < SCHEMA_VERSION:
            conn.execute("BEGIN IMMEDIATE")
            try:
                for statement in _SCHEMA.split(";"):
                    if statement.strip():
                        conn.execute(statement)
                conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
        _ensure_columns(conn)

    def _set_aside(self, why: str) -> None:
        stamp = time.strftime("%Y%m%d-%H%M%S")
        target = self.path.with_name(f"{self.path.name}.set-aside-{stamp}-{os.getpid()}")
        try:
            os.replace(self.path, target)
        except FileNotFoundError:  # another process set it aside first
            target = None  # type: ignore[assignment]
        for suffix in ("-wal", "-shm"):
            side = self.path.with_name(self.path.name + suffix)
            try:
                if suffix == "-shm" or side.stat().st_size == 0:
                    side.unlink()  # an index or an empty log: nothing to keep, and it must not meet the fresh file
                else:  # a non-empty log holds the last writes: it belongs with the file it was set aside with
                    os.replace(side, Path(str(target) + suffix) if target else side.with_name(side.name + ".stale"))
            except OSError:
                pass
        where = f"moved to {target}" if target else "already moved by another process"
        self._say(f"run history {self.path} was {why}; {where}; starting a fresh history")

    def _say(self, message: str) -> None:
        self.notices.append(message)
        LOG.warning(message)
        if self._notify:
            self._notify(message)

    # ---------------------------------------------------------------- retries

    def _retry(self, fn: Callable[[], T], attempts: int = 12) -> T:
        """Run `fn`, retrying with jittered backoff while SQLite says the database is locked/busy
        (the busy timeout covers most waits; this covers the cases SQLite reports immediately,
        such as a lock upgrade deadlock between two writers)."""
        delay = 0.01
        for attempt in range(attempts):
            try:
                return fn()
            except sqlite3.OperationalError as exc:
                text = str(exc).lower()
                if ("locked" not in text and "busy" not in text) or attempt == attempts - 1:
                    raise
                time.sleep(delay * (1 + random.random()))
                delay = min(delay * 2, 1.0)
        raise AssertionError("unreachable")

    # ---------------------------------------------------------------- writing and reading

    _MEASURED = (
        "recorded_at",
        "machine_id",
        "footprint",
        "model",
        "params",
        "flops_per_sample",
        "dataset_size",
        "batch_size",
        "profile_json",
        "backend",
        "threads",
        "device",
        "mode",
        "busy_cores",
        "cpu_percent",
        "predicted_s",
        "actual_s",
        "status",
        "epochs",
        "epochs_done",
        "energy_j",
        "energy_source",
        "ui_cores",
        "loader_workers",
        "memory_format",
        "precision",
    )

    @staticmethod
    def _measured(record: RunRecord) -> tuple[Any, ...]:
        """The values of _MEASURED for a record, in that order."""
        return (
            record.recorded_at,
            record.machine_id,
            record.footprint,
            record.model,
            int(record.profile.get("params", 0) or 0),
            float(record.profile.get("flops_per_sample", 0.0) or 0.0),
            int(record.profile.get("dataset_size", 0) or 0),
            int(record.profile.get("batch_size", 0) or 0),
            json.dumps(record.profile, sort_keys=True, default=str),
            record.plan.backend,
            record.plan.threads,
            record.plan.device,
            record.plan.mode,
            float(record.busy_cores),
            float(record.cpu_percent),
            record.predicted_s,
            float(record.actual_s),
            record.status,
            int(record.epochs),
            int(record.epochs_done),
            record.energy_j,
            record.energy_source,
            record.ui_cores,
            record.plan.loader_workers,
            record.plan.memory_format,
            record.plan.precision,
        )

    def _write(self, sql: str, values: tuple[Any, ...], conn: sqlite3.Connection | None = None) -> int:
        """One statement, committed; on `conn` (kept open by its owner) or on a connection of its own."""

        def write() -> int:
            own = conn or self._connect()
            try:
                cur = own.execute(sql, values)
                return int(cur.lastrowid or 0) if sql.startswith("INSERT") else cur.rowcount
            finally:
                if conn is None:
                    own.close()

        return self._retry(write)

    def connection(self) -> sqlite3.Connection:
        """A connection for a caller that writes often (a run's progress, once an epoch): opening
        one and closing it, the last one open, checkpoints the write-ahead log into the file and
        syncs it, a measurable cost each epoch under training load
        (docs/measurements.md#what-trainpilot-costs-on-the-cpu); a write on an open one appends to
        the log. The caller closes it."""
        return self._connect()

    def _insert(self, record: RunRecord, extra: dict[str, Any]) -> int:
        names = ("run_id", *self._MEASURED, *extra)
        sql = f"INSERT INTO runs ({', '.join(names)}) VALUES ({','.join('?' * len(names))})"
        return self._write(sql, (record.run_id, *self._measured(record), *extra.values()))

    def add(self, record: RunRecord) -> int:
        """Store one finished run; returns its row id. Concurrent writers each get their row."""
        return self._insert(record, {"learn": int(record.learn)})

    def start(self, record: RunRecord, *, pid: int, host: str, process_started_at: float | None) -> int:
        """A run begins: its row, status "running", with the process that runs it. Returns the row id."""
        return self._insert(
            replace(record, status="running"),
            {
                "pid": pid,
                "host": host,
                "process_started_at": process_started_at,
                "started_at": record.started_at or record.recorded_at,
                "learn": 0,
            },
        )

    def progress(self, row_id: int, *, checkpoint_epoch: int, conn: sqlite3.Connection | None = None) -> None:
        """A checkpoint was written: the row says up to which epoch the run can be resumed.
        `conn`: an open connection from `connection()` (a running session keeps one)."""
        self._write(
            "UPDATE runs SET checkpoint_epoch = ?, epochs_done = MAX(epochs_done, ?) WHERE id = ?",
            (int(checkpoint_epoch), int(checkpoint_epoch), int(row_id)),
            conn,
        )

    def finish(self, row_id: int, record: RunRecord, *, learn: bool = True) -> None:
        """The run ended: its final status and figures. `learn=False` keeps it out of the cost model
        (a run that timed two plans at once, or trained nothing)."""
        sets = ", ".join(f"{name} = ?" for name in self._MEASURED)
        changed = self._write(
            f"UPDATE runs SET {sets}, learn = ? WHERE id = ?", (*self._measured(record), int(learn), int(row_id))
        )
        if not changed:  # the row is gone (the file was set aside meanwhile): keep the run anyway
            self.add(replace(record, learn=learn))

    def mark(self, row_ids: list[int], status: str) -> None:
        """Give rows a status without touching their figures (a crashed attempt, once resumed)."""
        for row_id in row_ids:
            self._write("UPDATE runs SET status = ? WHERE id = ?", (status, int(row_id)))

    def records(self, machine_id: str | None = None, limit: int | None = None) -> list[RunRecord]:
        """Runs, newest first (all machines when `machine_id` is None)."""
        sql = "SELECT * FROM runs"
        args: list[Any] = []
        if machine_id is not None:
            sql += " WHERE machine_id = ?"
            args.append(machine_id)
        sql += " ORDER BY recorded_at DESC, id DESC"
        if limit is not None:
            sql += " LIMIT ?"
            args.append(int(limit))

        def read() -> list[RunRecord]:
            conn = self._connect()
            conn.row_factory = sqlite3.Row
            try:
                return [_from_row(row) for row in conn.execute(sql, args)]
            finally:
                conn.close()

        return self._retry(read)

    def count(self) -> int:
        def read() -> int:
            conn = self._connect()
            try:
                return int(conn.execute("SELECT COUNT(*) FROM runs").fetchone()[0])
            finally:
                conn.close()

        return self._retry(read)


class _SetAside(Exception):
    pass


def _ensure_columns(conn: sqlite3.Connection) -> None:
    """ALTER TABLE ADD COLUMN for each added column this file lacks. Two processes may open an
    old file at once: the one that loses the race finds the column there and moves on."""
    have = {row[1] for row in conn.execute("PRAGMA table_info(runs)")}
    for name, kind in ADDED_COLUMNS.items():
        if name in have:
            continue
        try:
            conn.execute(f"ALTER TABLE runs ADD COLUMN {name} {kind}")
        except sqlite3.OperationalError as exc:
            if "duplicate column" not in str(exc).lower():
                raise


def _from_row(row: sqlite3.Row) -> RunRecord:
    try:
        profile = json.loads(row["profile_json"])
    except ValueError:
        profile = {"model": row["model"], "params": row["params"], "flops_per_sample": row["flops_per_sample"]}
    return RunRecord(
        run_id=row["run_id"],
        recorded_at=row["recorded_at"],
        machine_id=row["machine_id"],
        footprint=row["footprint"],
        profile=profile,
        plan=Plan(
            row["backend"],
            threads=row["threads"],
            device=row["device"],
            mode=row["mode"],
            loader_workers=row["loader_workers"] if "loader_workers" in row.keys() else None,
            memory_format=row["memory_format"] if "memory_format" in row.keys() else None,
            precision=row["precision"] if "precision" in row.keys() else None,
        ),
        busy_cores=row["busy_cores"],
        cpu_percent=row["cpu_percent"],
        predicted_s=row["predicted_s"],
        actual_s=row["actual_s"],
        status=row["status"],
        epochs=row["epochs"],
        epochs_done=row["epochs_done"],
        id=row["id"],
        energy_j=row["energy_j"],
        energy_source=row["energy_source"],
        pid=row["pid"],
        host=row["host"],
        process_started_at=row["process_started_at"],
        started_at=row["started_at"],
        checkpoint_epoch=row["checkpoint_epoch"],
        learn=bool(row["learn"]),
        ui_cores=row["ui_cores"] if "ui_cores" in row.keys() else None,
    )


def run_record(
    *,
    run_id: str,
    machine_id: str,
    profile: Any,
    plan: Any,
    load: Any,
    predicted_s: float | None,
    actual_s: float,
    status: str,
    epochs_done: int,
) -> RunRecord:
    """One history row for a run of `profile` on `plan` under `load` (a UtilizationSample)."""
    return RunRecord(
        run_id=run_id,
        recorded_at=time.time(),
        machine_id=machine_id,
        footprint=profile.footprint,
        profile=profile.to_dict(),
        plan=plan,
        busy_cores=float(getattr(load, "busy_cores", 0.0) or 0.0),
        cpu_percent=float(getattr(load, "cpu_percent", 0.0) or 0.0),
        predicted_s=None if predicted_s is None or not math.isfinite(predicted_s) else float(predicted_s),
        actual_s=float(actual_s),
        status=status,
        epochs=int(profile.epochs),
        epochs_done=int(epochs_done),
        ui_cores=float(getattr(load, "ui_cores", 0.0) or 0.0),  # of busy_cores: TrainPilot's own UI
    )
