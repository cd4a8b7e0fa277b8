"""A run is in the history from its start: the row's lifecycle, crashed-run detection (pid reuse
included), `--resume last`, the additive migration of an old database, and that the cost model
never learns from a running or crashed row."""
from __future__ import annotations

import os
import socket
import sqlite3
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import psutil
import pytest

from trainpilot.errors import TrainPilotError
from trainpilot.plans import Plan
from trainpilot.predict.derive import calibration_for_target
from trainpilot.predict.history import _SCHEMA, ADDED_COLUMNS, History, RunRecord
from trainpilot.predict.learning import observe
from trainpilot.run.runlog import RunLog, effective_status, last_resumable
from trainpilot.machine.target_profiles import TargetBackend, TargetMachine

PROFILE = {"model": "mlp", "params": 1000, "flops_per_sample": 6000.0, "dataset_size": 100, "batch_size": 32,
           "layers": 2, "layer_kinds": {"dense": 2}, "input_shape": [8], "epochs": 2}


def _record(run_id: str = "r1", status: str = "success", **kw) -> RunRecord:
    base = dict(run_id=run_id, recorded_at=time.time(), machine_id="m1", footprint="mlp|p1000", profile=PROFILE,
                plan=Plan("cpu", threads=1), busy_cores=0.0, cpu_percent=5.0, predicted_s=1.0, actual_s=1.1,
                status=status, epochs=2, epochs_done=2)
    base.update(kw)
    return RunRecord(**base)


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_an_old_database_gains_the_new_columns_and_keeps_its_rows(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite3"
    with sqlite3.connect(path) as conn:  # a history exactly as schema 1 wrote it, with one run
        conn.executescript(_SCHEMA)
        conn.execute("PRAGMA user_version = 1")
        conn.execute(
            "INSERT INTO runs (run_id, recorded_at, machine_id, footprint, model, params, flops_per_sample, dataset_size,"
            " batch_size, profile_json, backend, threads, device, mode, busy_cores, cpu_percent, predicted_s, actual_s,"
            " status, epochs, epochs_done) VALUES ('old', 1.0, 'm1', 'mlp|p1000', 'mlp', 1000, 6000.0, 100, 32, '{}',"
            " 'cpu', 1, NULL, NULL, 0.0, 5.0, 1.0, 1.2, 'success', 1, 1)")
    history = History(path)
    with sqlite3.connect(path) as conn:
        columns = {row[1] for row in conn.execute("PRAGMA table_info(runs)")}
        assert set(ADDED_COLUMNS) <= columns
        assert conn.execute("PRAGMA user_version").fetchone()[0] == 1  # additive: older readers keep working
    (old,) = history.records()
    assert old.run_id == "old" and old.status == "success" and old.learn and old.pid is None
    assert effective_status(old) == "success"
    History(path)  # opening again adds nothing twice
    history.add(_record("new"))
    assert [r.run_id for r in history.records()] == ["new", "old"]


def test_a_row_lives_from_start_through_checkpoints_to_its_end(tmp_path: Path) -> None:
    history = History(tmp_path / "h.sqlite3")
    log = RunLog(history)
    log.start(_record(status="running", actual_s=0.0, epochs_done=0))
    (row,) = history.records()
    me = psutil.Process()
    assert row.status == "running" and row.pid == os.getpid() and row.host == socket.gethostname()
    assert row.process_started_at == pytest.approx(me.create_time()) and row.started_at is not None
    assert effective_status(row) == "running"  # this very process is alive
    log.checkpointed(1)
    assert history.records()[0].checkpoint_epoch == 1
    log.finish(_record(status="interrupted", epochs_done=1), learn=True)
    (row,) = history.records()
    assert (row.status, row.epochs_done, row.checkpoint_epoch, row.learn) == ("interrupted", 1, 1, True)


def test_progress_is_written_on_one_connection_held_from_start_to_finish(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Opening and closing a connection for each epoch's progress checkpoints SQLite's log into the
    file every time (~1.5 ms an epoch under training load, benchmarks/overhead.py); the run keeps
    one open, and other readers still see each epoch at once."""
    history, reader = History(tmp_path / "h.sqlite3"), History(tmp_path / "h.sqlite3")
    opened: list[object] = []
    connect = History._connect
    monkeypatch.setattr(History, "_connect", lambda self: opened.append(1) or connect(self))
    log = RunLog(history)
    log.start(_record(status="running", actual_s=0.0, epochs_done=0))
    at_start = len(opened)
    for epoch in (1, 2, 3):
        log.checkpointed(epoch)
        assert reader.records()[0].checkpoint_epoch == epoch  # another reader sees it at once
    assert len(opened) - at_start == 3  # the three readers' own connections; the progress used none
    log.finish(_record(status="success", epochs_done=3), learn=True)
    assert log._conn is None and history.records()[0].status == "success"


def test_a_running_row_without_its_process_reads_as_crashed_even_if_the_pid_was_reused(tmp_path: Path) -> None:
    here = socket.gethostname()
    mine = psutil.Process().create_time()
    alive = _record(status="running", pid=os.getpid(), host=here, process_started_at=mine)
    assert effective_status(alive) == "running"
    # Our pid, but a process created an hour earlier: the run's process died and the pid was reused.
    assert effective_status(replace(alive, process_started_at=mine - 3600)) == "crashed"
    assert effective_status(replace(alive, pid=_dead_pid())) == "crashed"
    # Another host's process cannot be checked from here.
    assert effective_status(replace(alive, pid=_dead_pid(), host=here + "-elsewhere")) == "running"


def test_resume_last_finds_the_newest_crashed_or_interrupted_run_with_a_checkpoint(tmp_path: Path, trainpilot_home: Path) -> None:
    history = History(tmp_path / "h.sqlite3")
    with pytest.raises(TrainPilotError, match="no run to resume"):
        last_resumable(history)
    dead = dict(pid=_dead_pid(), host=socket.gethostname(), process_started_at=1.0)
    history.start(_record("crashed-old", recorded_at=1.0), **dead)
    history.start(_record("crashed-no-checkpoint", recorded_at=3.0), **dead)
    history.add(_record("done", recorded_at=4.0))
    for run_id in ("crashed-old", "crashed-no-checkpoint", "done"):
        (trainpilot_home / "runs" / run_id).mkdir(parents=True)
    (trainpilot_home / "runs" / "crashed-old" / "latest.pt").write_bytes(b"x")
    (trainpilot_home / "runs" / "done" / "latest.pt").write_bytes(b"x")
    assert last_resumable(history) == "crashed-old"
    # Once resumed, the crashed attempt says so for good and the run's newest attempt decides.
    RunLog(history).start(_record("crashed-old", status="running"))
    statuses = {(r.run_id, r.id): r.status for r in history.records()}
    assert sorted(s for (run, _), s in statuses.items() if run == "crashed-old") == ["crashed", "running"]
    with pytest.raises(TrainPilotError, match="no run to resume"):
        last_resumable(history)  # the resumed attempt is this live process


def test_the_cost_model_learns_only_from_finished_runs_that_timed_one_plan() -> None:
    target = TargetMachine(name="box", description="test", sources=("tests",), system="Linux", machine="x86_64", logical_cpus=2,
                           performance_cores=2, memory_bytes=8 * 2**30, cpu_flops_per_core=50e9,
                           backends={"cpu": TargetBackend(peak_flops=2e11, memory_bandwidth_bytes_per_s=20e9, precision="fp32")})
    calibration = calibration_for_target(target)
    records = [
        _record("ok"),
        _record("interrupted", status="interrupted", epochs_done=1),
        _record("running", status="running", actual_s=0.0, epochs_done=1),
        _record("crashed", status="crashed", actual_s=0.0, epochs_done=1),
        _record("two-plans", learn=False),
    ]
    assert [o.record.run_id for o in observe(records, calibration)] == ["ok", "interrupted"]
