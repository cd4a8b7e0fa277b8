"""A session is a stream of typed events; steering requests apply at step boundaries."""
from __future__ import annotations

import threading

import numpy as np
import pytest
import torch

from trainpilot import events as ev
from trainpilot.run.checkpoint import load_checkpoint
from trainpilot.job.data import demo_dataset, validate
from trainpilot.plans import Plan
from trainpilot.run.session import SessionConfig, TrainingSession, run_session


@pytest.fixture(scope="module")
def small_demo():
    full = demo_dataset(n=600)
    return validate(full.X, full.y, "demo")


def kinds(events):
    return [e.kind for e in events]


def test_full_session_event_order_and_result(small_demo):
    result, events = run_session(SessionConfig(model="small_cnn", epochs=2, batch_size=32), dataset=small_demo)
    names = kinds(events)
    assert names[0] == "SessionStarted" and names[1] == "HardwareObserved"
    assert names.index("BackendChosen") < names.index("StepProgressed") < names.index("EpochTimed")
    assert names[-1] == "RunFinished" and names.count("EpochTimed") == 2 and names.count("CheckpointSaved") == 2
    assert result["status"] == "success" and result["backend"] == "cpu"
    for key in ("run_id", "plan", "confidence", "params", "predicted_s", "actual_s", "val_accuracy", "message", "epochs"):
        assert key in result
    assert [e["epoch"] for e in result["epochs"]] == [1, 2]
    assert all(e["actual_s"] > 0 and e["predicted_s"] > 0 for e in result["epochs"])
    assert result["actual_s"] == pytest.approx(sum(e["actual_s"] for e in result["epochs"]))


def test_demo_set_is_learnable(small_demo):
    result, _ = run_session(SessionConfig(model="small_cnn", epochs=3, batch_size=32, lr=3e-3), dataset=small_demo)
    assert result["val_accuracy"] > 0.5  # chance is 0.1


def test_same_seed_same_weights(small_demo, trainpilot_home):
    a, _ = run_session(SessionConfig(model="mlp", epochs=1, seed=3, threads=1, backend="cpu"), dataset=small_demo)
    b, _ = run_session(SessionConfig(model="mlp", epochs=1, seed=3, threads=1, backend="cpu"), dataset=small_demo)
    wa, wb = (load_checkpoint(trainpilot_home / "runs" / r["run_id"])["model_state"] for r in (a, b))
    assert all(torch.equal(wa[k], wb[k]) for k in wa)


def test_unavailable_backend_falls_back_to_cpu_with_reason(small_demo):
    result, events = run_session(SessionConfig(model="mlp", epochs=1, backend="cuda"), dataset=small_demo)
    assert result["status"] == "success" and result["backend"] == "cpu"
    assert "cuda unavailable" in result["fallback_reason"]
    chosen = [e for e in events if isinstance(e, ev.BackendChosen)][0]
    assert chosen.source == "fallback" and "cuda" in chosen.reason


def _steer_on_first_step(session, action):
    done = threading.Event()
    for event in session.events():
        if isinstance(event, ev.StepProgressed) and not done.is_set():
            done.set()
            action(session)
        yield event


def test_override_mid_run_switches_plan_and_keeps_training(small_demo):
    session = TrainingSession(SessionConfig(model="mlp", epochs=1, batch_size=16, backend="cpu", threads=2), dataset=small_demo)
    events = list(_steer_on_first_step(session, lambda s: s.override_backend("cpu", threads=1)))
    chosen = [e for e in events if isinstance(e, ev.BackendChosen)]
    assert [c.source for c in chosen] == ["user", "user"]
    assert chosen[-1].plan.threads == 1 and chosen[-1].switch_cost_s == 0.0
    epoch = [e for e in events if isinstance(e, ev.EpochTimed)][0]
    assert [s["plan"]["threads"] for s in epoch.segments] == [2, 1]
    assert sum(s["steps"] for s in epoch.segments) == session.trainer.steps_per_epoch
    assert events[-1].status == "success"


def test_override_to_unavailable_backend_is_refused(small_demo):
    session = TrainingSession(SessionConfig(model="mlp", epochs=1, batch_size=16), dataset=small_demo)
    answers = []
    events = list(_steer_on_first_step(session, lambda s: answers.append(s.override_backend("mps"))))
    assert not answers[0] and answers[0].reason
    refused = [e for e in events if isinstance(e, ev.OverrideRefused)]
    assert refused and refused[0].requested == "mps"
    assert events[-1].status == "success" and events[-1].result["backend"] == "cpu"


def test_pause_and_resume(small_demo):
    session = TrainingSession(SessionConfig(model="mlp", epochs=1, batch_size=16), dataset=small_demo)

    def pause_then_resume(s):
        s.pause()
        s.resume()

    events = list(_steer_on_first_step(session, pause_then_resume))
    names = kinds(events)
    assert names.index("SessionPaused") < names.index("SessionResumed") < names.index("RunFinished")


def test_stop_request_checkpoints_and_resume_finishes(small_demo, trainpilot_home):
    session = TrainingSession(SessionConfig(model="mlp", epochs=2, batch_size=16), dataset=small_demo)
    events = list(_steer_on_first_step(session, lambda s: s.request_stop("test")))
    assert events[-1].status == "interrupted" and "--resume" in events[-1].message
    saved = [e for e in events if isinstance(e, ev.CheckpointSaved)]
    assert saved[-1].reason == "interrupt" and saved[-1].step == 1
    resumed = TrainingSession(SessionConfig(resume=session.run_id), dataset=small_demo)
    out = list(resumed.events())
    assert out[0].resumed_from_epoch == 0 and out[-1].status == "success"
    assert resumed.run_id == session.run_id
    assert [e.epoch for e in out if isinstance(e, ev.EpochTimed)] == [1, 2]  # the run's own count
    longer = list(TrainingSession(SessionConfig(resume=session.run_id, epochs=3), dataset=small_demo).events())
    assert [e.epoch for e in longer if isinstance(e, ev.EpochTimed)] == [3]  # an explicit count goes on


def test_bad_model_fails_cleanly(small_demo):
    result, events = run_session(SessionConfig(model="nope"), dataset=small_demo)
    assert result["status"] == "failed" and "unknown model 'nope'" in result["message"]


def test_event_serialises_to_plain_json(small_demo):
    import json

    _, events = run_session(SessionConfig(model="mlp", epochs=1), dataset=small_demo)
    for event in events:
        data = ev.event_to_dict(event)
        assert data["kind"] == event.kind
        json.dumps(data)


def test_tabular_dataset_trains_mlp():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 8)).astype(np.float32)
    y = (X[:, 0] + X[:, 1] > 0).astype(np.int64)
    result, _ = run_session(SessionConfig(model="mlp", epochs=5, lr=1e-2), dataset=validate(X, y, "table"))
    assert result["val_accuracy"] >= 0.8


def test_first_run_on_a_machine_calibrates_the_cost_model(small_demo, monkeypatch):
    from trainpilot.compat.orchestrator import HardwareOrchestrator
    from trainpilot.predict import CostModel

    monkeypatch.setenv("TRAINPILOT_AUTO_CALIBRATE", "1")
    calls = []
    monkeypatch.setattr(CostModel, "calibrate", lambda self, progress=None, quick=False: calls.append(quick))
    session = TrainingSession(SessionConfig(model="mlp", epochs=1), orchestrator=HardwareOrchestrator(), dataset=small_demo)
    texts = [e.text for e in session.events() if isinstance(e, ev.AgentStepped)]
    assert calls == [True]
    assert any(t.startswith("first run on this machine: a quick calibration") for t in texts)
    monkeypatch.setenv("TRAINPILOT_AUTO_CALIBRATE", "0")
    list(TrainingSession(SessionConfig(model="mlp", epochs=1), dataset=small_demo).events())
    assert calls == [True]


def test_history_learns_single_plan_runs_under_the_load_they_met(small_demo):
    from trainpilot.compat.orchestrator import HardwareOrchestrator
    from trainpilot.predict import History
    from trainpilot.paths import history_db_path

    agent = HardwareOrchestrator()
    run_session(SessionConfig(model="mlp", epochs=1, backend="cpu", threads=1), orchestrator=agent, dataset=small_demo)
    session = TrainingSession(SessionConfig(model="mlp", epochs=1, batch_size=16, backend="cpu", threads=2), orchestrator=agent, dataset=small_demo)
    list(_steer_on_first_step(session, lambda s: s.override_backend("cpu", threads=1)))
    records = History(history_db_path()).records(agent.hardware.machine_id, 10)
    # Both runs are in the history; the one that switched plans mid-way teaches nothing.
    assert [(r.status, r.learn) for r in records] == [("success", False), ("success", True)]
    assert records[1].plan == Plan("cpu", threads=1)


def test_step_progress_is_paced_as_its_caller_asks(small_demo):
    """A caller that paints once a second says so (the terminal app): step events between its
    paints are not sent, the first and last steps of every epoch always are (every event the
    app receives is work taken from the training it shows)."""
    def progress(interval):
        session = TrainingSession(SessionConfig(model="mlp", epochs=2, batch_size=16, backend="cpu", threads=1, record_history=False), dataset=small_demo)
        if interval is not None:
            session.show_progress_every(interval)
        return [e for e in session.events() if isinstance(e, ev.StepProgressed)]

    steps_per_epoch = -(-540 // 16)
    every = progress(0.0)
    assert [(e.epoch, e.step) for e in every] == [(epoch, step) for epoch in (1, 2) for step in range(1, steps_per_epoch + 1)]
    rare = progress(3600.0)  # each epoch's first and last step, nothing between
    assert [(e.epoch, e.step) for e in rare] == [(1, 1), (1, steps_per_epoch), (2, 1), (2, steps_per_epoch)]
