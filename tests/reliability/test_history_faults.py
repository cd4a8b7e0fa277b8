"""The run history (owned by the cost model, tested here through its public API): concurrent
writers lose nothing, killed writers lose nothing they reported stored, a damaged or newer file is
set aside with a message and never crashes a run, and an interrupted run is recorded as such."""
from __future__ import annotations

import random
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from faultkit import corpus, scratch
from faultkit.procs import child_env

history = pytest.importorskip("trainpilot.predict.history")
from trainpilot.plans import Plan  # noqa: E402
from trainpilot.predict import CostModel, History  # noqa: E402

WRITER = Path(__file__).parent / "faultkit" / "history_writer.py"


def writers(db: Path, home: Path, count: int, n: int) -> list[subprocess.Popen]:
    return [subprocess.Popen([sys.executable, str(WRITER), str(db), f"w{i}", str(n)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=child_env(home)) for i in range(count)]


def stored_ids(db: Path) -> list[str]:
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        return [row[0] for row in conn.execute("SELECT run_id FROM runs")]


def test_four_writers_fifty_records_each_lose_nothing(tmp_path, trainpilot_home):
    db = tmp_path / "history.sqlite3"
    procs = writers(db, trainpilot_home, 4, 50)
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
    ids = stored_ids(db)
    assert len(ids) == 200 and set(ids) == {f"w{w}-{i}" for w in range(4) for i in range(50)}


def test_writers_killed_mid_write_lose_nothing_they_stored(tmp_path, trainpilot_home):
    db = tmp_path / "history.sqlite3"
    History(db)  # create it first, so every writer opens an existing database
    rng = random.Random(3)
    acknowledged: set[str] = set()
    for round_ in range(3):
        procs = writers(db, trainpilot_home, 3, 100_000)
        time.sleep(rng.uniform(0.8, 1.5))
        for proc in procs:
            proc.send_signal(signal.SIGKILL)
        for proc in procs:
            out, _ = proc.communicate(timeout=30)
            acknowledged |= {f"{line}#{round_}" for line in out.split()}
    reopened = History(db)
    assert reopened.notices == []  # recovered from the WAL, not set aside
    per_round: dict[int, set[str]] = {}
    for item in acknowledged:
        run_id, round_ = item.split("#")
        per_round.setdefault(int(round_), set()).add(run_id)
    stored = stored_ids(db)
    assert len(acknowledged) > 30  # the writers did get going
    # Each round reuses the run ids w0-0, w0-1, ...: every id acknowledged is there as often as
    # the rounds that acknowledged it, at least.
    for run_id in set().union(*per_round.values()):
        rounds = sum(run_id in ids for ids in per_round.values())
        assert stored.count(run_id) >= rounds, run_id


@pytest.fixture(scope="module")
def history_bytes(tmp_path_factory) -> bytes:
    db = tmp_path_factory.mktemp("hist") / "history.sqlite3"
    procs = writers(db, db.parent, 1, 40)
    procs[0].communicate(timeout=60)
    with sqlite3.connect(db) as conn:  # fold the WAL into the main file so its bytes are the database
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return db.read_bytes()


@pytest.fixture(scope="module")
def job():
    from trainpilot.job.data import demo_dataset
    from trainpilot.backends import probe
    from trainpilot.machine.monitor import measure_load
    from trainpilot.job.models import build_model
    from trainpilot.job.workload import profile_model

    data = demo_dataset(n=60)
    profile = profile_model(build_model("mlp", data.sample_shape, 10), data.sample_shape, 10, 60, name="mlp")
    return probe(), profile, measure_load(0.0)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(kind=st.sampled_from(corpus.MUTATIONS), position=st.floats(0, 1, exclude_max=True), size=st.integers(1, 512), seed=st.integers(0, 2**31))
def test_a_damaged_history_never_crashes_a_run(history_bytes, job, kind, position, size, seed):
    hardware, profile, load = job
    home = scratch.fresh_dir("hist")
    db = home / "history.sqlite3"
    db.write_bytes(corpus.mutate(history_bytes, kind, position, size, seed))
    model = CostModel.open(home, hardware)  # must not raise
    model.predict(profile, Plan("cpu", threads=1), load)  # must not raise
    model.record(profile, Plan("cpu", threads=1), load, 1.0, 1.2, run_id="after-damage", status="success", epochs_done=1)  # must not raise
    set_aside = list(home.glob("history.sqlite3.set-aside-*"))
    if set_aside:
        assert any("set aside" in n or "moved to" in n for n in model.notices), model.notices  # said so
        assert set_aside[0].stat().st_size > 0  # the old file is kept, not deleted


def test_a_newer_history_is_set_aside_with_a_message(tmp_path, job):
    hardware, profile, load = job
    db = tmp_path / "history.sqlite3"
    with sqlite3.connect(db) as conn:
        conn.execute("PRAGMA user_version = 99")
    model = CostModel.open(tmp_path, hardware)
    assert any("newer TrainPilot" in n for n in model.notices), model.notices
    model.record(profile, Plan("cpu", threads=1), load, 1.0, 1.0, run_id="fresh", status="success", epochs_done=1)
    assert [r.run_id for r in History(db).records()] == ["fresh"]
    assert list(tmp_path.glob("history.sqlite3.set-aside-*"))


@pytest.mark.parametrize("stop_in_epoch", [1, 2])
def test_an_interrupted_run_is_recorded_as_interrupted(trainpilot_home, job, stop_in_epoch):
    from trainpilot import events as ev
    from trainpilot.compat.orchestrator import HardwareOrchestrator
    from trainpilot.job.data import demo_dataset, validate
    from trainpilot.run.session import SessionConfig, TrainingSession

    hardware = job[0]
    model = CostModel.open(trainpilot_home, hardware)
    full = demo_dataset(n=300)
    session = TrainingSession(
        SessionConfig(model="mlp", epochs=3, batch_size=16, backend="cpu", threads=1, run_id=f"stopped-{stop_in_epoch}"),
        orchestrator=HardwareOrchestrator(predictor=model, hardware=hardware),
        dataset=validate(full.X, full.y, "demo"),
    )
    for event in session.events():
        if isinstance(event, ev.StepProgressed) and event.epoch == stop_in_epoch:
            session.request_stop("SIGINT")
    assert session.finished.status == "interrupted"
    records = History(trainpilot_home / "history.sqlite3").records()
    assert [(r.run_id, r.status, r.epochs_done) for r in records] == [(f"stopped-{stop_in_epoch}", "interrupted", stop_in_epoch - 1)]
