"""The app's session in a process of its own (trainpilot/session_process.py): the same events and
steering as a session in this process, a child that dies is reported, a parent that dies leaves a
checkpointed run, and the child counts the parent's CPU as its UI's load."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psutil
import pytest

from trainpilot import events as ev
from trainpilot.job.data import write_demo_dataset
from trainpilot.run.session import SessionConfig, TrainingSession
from trainpilot.run.process import ProcessSession, SessionProcessDied

CORE = Path(__file__).resolve().parents[3] / "core"


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> str:
    return str(write_demo_dataset(tmp_path_factory.mktemp("data") / "demo600", n=600, seed=5))


def _config(data_dir: str, **kw) -> SessionConfig:
    return SessionConfig(model="mlp", dataset=data_dir, backend="cpu", threads=1, record_history=False, **{"epochs": 2, **kw})


def test_the_child_streams_the_same_run_as_a_session_here(data_dir: str) -> None:
    here = TrainingSession(_config(data_dir))
    local = [type(e).__name__ for e in here.events() if not isinstance(e, ev.StepProgressed)]
    remote_session = ProcessSession(_config(data_dir))
    events = list(remote_session.events())
    remote = [type(e).__name__ for e in events if not isinstance(e, ev.StepProgressed)]
    assert remote == local
    assert remote_session.finished is events[-1] and remote_session.finished.status == "success"
    assert {e.run_id for e in events if hasattr(e, "run_id")} == {remote_session.run_id}
    # the same seed, the same data, one thread: the child trains the same model as this process
    assert remote_session.finished.result["val_accuracy"] == pytest.approx(here.finished.result["val_accuracy"])
    assert remote_session.pid is not None and not psutil.pid_exists(remote_session.pid) or \
        psutil.Process(remote_session.pid).status() == psutil.STATUS_ZOMBIE


def test_steering_reaches_the_child_and_comes_back_as_events(data_dir: str) -> None:
    session = ProcessSession(_config(data_dir, epochs=30))
    refused = session.override_backend("quantum")
    assert not refused and "unknown backend 'quantum'" in refused.reason
    chosen: list[ev.BackendChosen] = []
    for event in session.events():
        if isinstance(event, ev.BackendChosen):
            chosen.append(event)
            if len(chosen) == 1:
                assert session.override_backend("cpu", 2)  # moves at the next step boundary
        if isinstance(event, ev.EpochTimed) and len(chosen) == 2:
            session.request_stop("user")
    assert [c.source for c in chosen] == ["user", "user"]  # --backend cpu, then the override
    assert chosen[1].plan.threads == 2
    assert session.finished is not None and session.finished.status == "interrupted"
    assert len(session.finished.result["epochs"]) < 30



def test_release_reaches_the_child_and_hands_a_pinned_run_back_to_the_agent(data_dir: str) -> None:
    session = ProcessSession(_config(data_dir, epochs=30))  # --backend cpu --threads 1: pinned by the user
    acts: list[str] = []
    for event in session.events():
        if isinstance(event, ev.BackendChosen) and event.source == "user":
            session.release()  # applied at the next step boundary
        if isinstance(event, ev.AgentStepped) and event.phase == "act":
            acts.append(event.text)
            if event.text.startswith("you handed the run back"):
                session.request_stop("user")
    assert any(text.startswith("the plan is pinned by your choice") for text in acts), acts
    assert any(text.startswith("you handed the run back: the agent decides again") for text in acts), acts
    assert session.finished is not None and session.finished.status == "interrupted"

def test_the_child_paces_step_progress_as_asked(data_dir: str) -> None:
    session = ProcessSession(_config(data_dir, epochs=2))
    session.show_progress_every(3600.0)  # told before the run starts, as the app does
    steps = [(e.epoch, e.step, e.steps_per_epoch) for e in session.events() if isinstance(e, ev.StepProgressed)]
    last = steps[-1][2]
    assert [(epoch, step) for epoch, step, _ in steps] == [(1, 1), (1, last), (2, 1), (2, last)]


def test_stopped_before_it_started_the_child_trains_nothing_and_exits(data_dir: str) -> None:
    session = ProcessSession(_config(data_dir))
    session.request_stop("quit")
    session._process.join(60)
    assert session._process.exitcode == 0
    assert not (Path(os.environ["TRAINPILOT_HOME"]) / "runs" / session.run_id).exists()


def test_a_child_killed_mid_run_is_an_error_that_says_how_it_ended(data_dir: str) -> None:
    session = ProcessSession(_config(data_dir, epochs=200))
    with pytest.raises(SessionProcessDied) as caught:
        for event in session.events():
            if isinstance(event, ev.EpochTimed):
                os.kill(session.pid, signal.SIGKILL)
    text = str(caught.value)
    assert "killed by signal 9" in text and str(session.log_path) in text and "--resume last" in text


PARENT = textwrap.dedent("""
    import sys
    sys.path.insert(0, sys.argv[1])
    from trainpilot import events as ev
    from trainpilot.run.session import SessionConfig
    from trainpilot.run.process import ProcessSession

    if __name__ == "__main__":
        session = ProcessSession(SessionConfig(model="mlp", dataset=sys.argv[2], backend="cpu", threads=1, epochs=500, run_id="orphan-1"))
        for event in session.events():
            if isinstance(event, ev.CheckpointSaved):
                print(session.pid, flush=True)
""")


def test_a_child_whose_app_is_killed_stops_at_a_step_boundary_with_a_checkpoint(data_dir: str, tmp_path: Path) -> None:
    script = tmp_path / "parent.py"
    script.write_text(PARENT)
    parent = subprocess.Popen([sys.executable, str(script), str(CORE), data_dir], stdout=subprocess.PIPE, text=True, env=dict(os.environ))
    try:
        child_pid = int(parent.stdout.readline())  # after its first checkpoint
        parent.kill()
        parent.wait(30)
        psutil.Process(child_pid).wait(120)  # the child notices, finishes the step, checkpoints, exits
    finally:
        if parent.poll() is None:
            parent.kill()
    from trainpilot.predict.history import History
    from trainpilot.paths import history_db_path

    (row,) = [r for r in History(history_db_path()).records() if r.run_id == "orphan-1"]
    assert row.status == "interrupted", row.status
    checkpoint = Path(os.environ["TRAINPILOT_HOME"]) / "runs" / "orphan-1"
    assert any(checkpoint.rglob("*.pt")), list(checkpoint.rglob("*"))


def test_the_meter_counts_a_registered_ui_process_as_ui_load() -> None:
    from trainpilot.machine import contention

    busy = subprocess.Popen([sys.executable, "-c", "import time\nend = time.time() + 20\nwhile time.time() < end: pass"])
    try:
        time.sleep(0.3)
        before = dict(contention._UI_PROCESSES)
        contention.count_as_ui(busy.pid)
        try:
            with contention.ExternalCpuMeter() as meter:
                time.sleep(0.6)
        finally:
            contention._UI_PROCESSES.clear()
            contention._UI_PROCESSES.update(before)
        # One busy loop: up to a core, less when the machine is shared (CI); not counted would be ~0.
        assert meter.result.ui_cores > 0.2
        assert meter.result.cores >= meter.result.ui_cores
    finally:
        busy.kill()
        busy.wait()
