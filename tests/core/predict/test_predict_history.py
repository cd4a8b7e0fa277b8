"""The run history: concurrent writers lose nothing; a damaged or newer file is set aside, never a crash."""
from __future__ import annotations

import multiprocessing as mp
import sqlite3
import time
from pathlib import Path

import pytest

from trainpilot.plans import Plan
from trainpilot.predict.history import SCHEMA_VERSION, History, RunRecord


def _record(i: int, writer: int = 0, machine: str = "m1") -> RunRecord:
    return RunRecord(
        run_id=f"w{writer}-r{i}",
        recorded_at=time.time(),
        machine_id=machine,
        footprint=f"mlp|p{1000 + i % 3}",
        profile={"model": "mlp", "params": 1000 + i % 3, "flops_per_sample": 6000.0, "dataset_size": 100, "batch_size": 32,
                 "layers": 2, "layer_kinds": {"dense": 2}, "input_shape": [8], "epochs": 1},
        plan=Plan("cpu", threads=1 + i % 2),
        busy_cores=0.1 * (i % 4),
        cpu_percent=5.0,
        predicted_s=1.0 + i,
        actual_s=1.1 + i,
        status="success",
        epochs=1,
        epochs_done=1,
    )


def _writer(path: str, writer: int, count: int) -> None:
    history = History(path)
    for i in range(count):
        history.add(_record(i, writer))


def test_round_trip(tmp_path: Path) -> None:
    history = History(tmp_path / "h.sqlite3")
    rid = history.add(_record(7))
    (got,) = history.records("m1")
    assert got.id == rid and got.run_id == "w0-r7" and got.plan == Plan("cpu", threads=2)
    assert got.predicted_s == 8.0 and got.actual_s == pytest.approx(8.1)
    assert got.error == pytest.approx(8.0 / 8.1 - 1)
    assert got.profile["layer_kinds"] == {"dense": 2}
    assert history.records("other-machine") == []
    with sqlite3.connect(tmp_path / "h.sqlite3") as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION


def test_newest_first_and_limit(tmp_path: Path) -> None:
    history = History(tmp_path / "h.sqlite3")
    for i in range(5):
        history.add(_record(i))
    runs = history.records("m1", limit=3)
    assert [r.run_id for r in runs] == ["w0-r4", "w0-r3", "w0-r2"]


def test_four_concurrent_writers_lose_nothing(tmp_path: Path) -> None:
    path = tmp_path / "shared.sqlite3"
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=_writer, args=(str(path), w, 50)) for w in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    history = History(path)
    runs = history.records()
    assert len(runs) == 200
    assert {r.run_id for r in runs} == {f"w{w}-r{i}" for w in range(4) for i in range(50)}
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


def test_corrupt_file_is_set_aside(tmp_path: Path) -> None:
    path = tmp_path / "history.sqlite3"
    path.write_bytes(b"this is not a database, it is a text file that someone saved here" * 100)
    messages: list[str] = []
    history = History(path, notify=messages.append)
    assert messages and "starting a fresh history" in messages[0]
    assert history.notices == messages
    aside = [p for p in tmp_path.iterdir() if ".set-aside-" in p.name]
    assert len(aside) == 1 and aside[0].read_bytes().startswith(b"this is not a database")
    history.add(_record(1))
    assert len(history.records()) == 1


def test_truncated_database_is_set_aside(tmp_path: Path) -> None:
    path = tmp_path / "history.sqlite3"
    history = History(path)
    for i in range(120):
        history.add(_record(i))
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 3])  # a disk that filled up mid-copy
    for side in ("-wal", "-shm"):
        (tmp_path / f"history.sqlite3{side}").unlink(missing_ok=True)
    fresh = History(path)
    fresh.add(_record(1))
    assert len(fresh.records()) == 1
    assert any("set-aside" in p.name for p in tmp_path.iterdir())


def test_newer_schema_is_set_aside_not_overwritten(tmp_path: Path) -> None:
    path = tmp_path / "history.sqlite3"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE future (x)")
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 5}")
    history = History(path)
    assert "newer TrainPilot" in history.notices[0]
    (aside,) = [p for p in tmp_path.iterdir() if ".set-aside-" in p.name and not p.name.endswith(("-wal", "-shm"))]
    with sqlite3.connect(aside) as conn:  # the newer data survives, untouched
        assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION + 5
    history.add(_record(2))
    assert [r.run_id for r in history.records()] == ["w0-r2"]
