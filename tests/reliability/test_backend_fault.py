"""A device that fails mid-run: the run goes back to the last good state, on the CPU, says why,
and finishes with exactly the weights a CPU-only run reaches."""
from __future__ import annotations

import pytest
import torch

from reliability_run import trainer_state
from faultkit.doubles import FlakyBackend, install
from trainpilot import events as ev
from trainpilot.job.data import demo_dataset, validate
from trainpilot.run.session import SessionConfig, TrainingSession

EPOCHS, BATCH = 2, 32  # 17 steps per epoch on 600 samples


@pytest.fixture(scope="module")
def data():
    full = demo_dataset(n=600)
    return validate(full.X, full.y, "demo")


@pytest.fixture(autouse=True)
def keep_threads():
    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)


def run(data, backend: str, flaky: FlakyBackend | None = None, steer=None):
    undo = install(flaky) if flaky else (lambda: None)
    try:
        config = SessionConfig(model="mlp", epochs=EPOCHS, batch_size=BATCH, seed=11, backend=backend, threads=1, record_history=False)
        session = TrainingSession(config, dataset=data)
        events = []
        for event in session.events():
            events.append(event)
            if steer:
                steer(session, event)
        return session, events
    finally:
        undo()


@pytest.fixture(scope="module")
def cpu_reference(data):
    session, _ = run(data, "cpu")
    assert session.finished.status == "success"
    return trainer_state(session.trainer)


def assert_same_weights(session, reference):
    state = trainer_state(session.trainer)
    for name, tensor in reference["model_state"].items():
        assert torch.equal(state["model_state"][name], tensor), name


@pytest.mark.parametrize(
    "fault, at, error",
    [
        ("step", 5, "illegal memory access"),  # epoch 1, weights half-updated
        ("step", 17 + 9, "illegal memory access"),  # epoch 2: back to the epoch-1 checkpoint state
        ("nan", 20, "loss became nan"),
        ("sync", 1, "unspecified launch failure"),  # at the end of epoch 1, before its checkpoint
        ("move", 1, "OutOfMemoryError"),
        ("convert", 1, "Core ML conversion failed"),
    ],
)
def test_device_fault_falls_back_to_cpu_from_last_good_state(data, cpu_reference, fault, at, error):
    flaky = FlakyBackend(fault, at)
    session, events = run(data, "cuda", flaky)
    result = session.finished.result
    assert result["status"] == "success", result["message"]
    assert result["backend"] == "cpu" and result["plan"]["threads"] == 1
    assert error in result["fallback_reason"] and "fell back to the CPU" in result["message"]
    fallback = [e for e in events if isinstance(e, ev.BackendChosen) and e.source == "fallback"]
    assert len(fallback) == 1 and error in fallback[0].reason
    assert any(isinstance(e, ev.AgentStepped) and "last good state" in e.text for e in events)
    assert [r["epoch"] for r in result["epochs"]] == [1, 2]  # each epoch recorded once
    assert_same_weights(session, cpu_reference)


def test_fault_while_moving_to_a_device_mid_run(data, cpu_reference):
    """A user override to the device at step 3 of epoch 2; the move fails half way."""
    flaky = FlakyBackend("move", 1)

    def steer(session, event):
        if isinstance(event, ev.StepProgressed) and event.epoch == 2 and not getattr(session, "_asked", False):
            session._asked = True
            session.override_backend("cuda")

    session, events = run(data, "cpu", flaky, steer)
    result = session.finished.result
    assert result["status"] == "success", result["message"]
    assert "OutOfMemoryError" in result["fallback_reason"]
    assert [e.source for e in events if isinstance(e, ev.BackendChosen)] == ["user", "fallback"]
    assert_same_weights(session, cpu_reference)


def test_device_fault_after_override_resumes_from_the_switch_point(data, cpu_reference):
    """On the device from a mid-epoch override; it fails 4 steps later: back to the switch point."""
    flaky = FlakyBackend("step", 4)

    def steer(session, event):
        if isinstance(event, ev.StepProgressed) and event.epoch == 1 and event.step >= 6 and not getattr(session, "_asked", False):
            session._asked = True
            session.override_backend("cuda")

    session, events = run(data, "cpu", flaky, steer)
    result = session.finished.result
    assert result["status"] == "success", result["message"]
    assert [e.source for e in events if isinstance(e, ev.BackendChosen)] == ["user", "user", "fallback"]
    assert_same_weights(session, cpu_reference)


def test_nan_on_the_cpu_fails_cleanly_and_keeps_the_last_good_checkpoint(data, trainpilot_home):
    from trainpilot.run.checkpoint import load_checkpoint

    # A learning rate so large that one Adam step makes the activations overflow to inf - inf.
    config = SessionConfig(model="mlp", epochs=3, batch_size=BATCH, backend="cpu", threads=1, lr=1e30, run_id="diverges", record_history=False)
    session = TrainingSession(config, dataset=data)
    events = list(session.events())
    assert session.finished.status == "failed"
    assert "NaN" in session.finished.message or "nan" in session.finished.message
    assert "\n" not in session.finished.message
    saved = [e for e in events if isinstance(e, ev.CheckpointSaved)]
    path = trainpilot_home / "runs" / "diverges"
    if saved:  # whatever was saved holds finite weights
        state = load_checkpoint(path)
        assert all(bool(t.isfinite().all()) for t in state["model_state"].values())
    else:
        assert not path.exists()
