"""The app on a real, tiny training session (mlp on a small slice of the demo set): the keys reach
the core's TrainingSession, and quitting mid-run leaves a checkpoint that resumes."""
from __future__ import annotations

from functools import partial
from pathlib import Path

import pytest

from trainpilot.run.checkpoint import load_checkpoint
from trainpilot.job.data import demo_dataset
from trainpilot.plans import Plan
from trainpilot.run.session import SessionConfig, TrainingSession
from trainpilot_tui.app import TrainPilotApp
from trainpilot_tui.app.screens import BackendChooser, ConfirmQuit

from .conftest import wait_until
from .scripted import sample_source, scripted_samples

SIZE = (100, 30)


@pytest.fixture(autouse=True)
def no_first_sight_calibration(monkeypatch: pytest.MonkeyPatch) -> None:
    # the agent's quick calibration (seconds) is the core's business, tested there
    monkeypatch.setenv("TRAINPILOT_AUTO_CALIBRATE", "0")


@pytest.fixture(scope="module")
def dataset():  # type: ignore[no-untyped-def]
    return demo_dataset(400, seed=3)


def real_app(dataset, sessions: list[TrainingSession], epochs: int = 2) -> TrainPilotApp:  # type: ignore[no-untyped-def]
    def factory(config: SessionConfig) -> TrainingSession:
        session = TrainingSession(config, dataset=dataset)
        sessions.append(session)
        return session

    config = SessionConfig(model="mlp", epochs=epochs, batch_size=32, record_history=False)
    return TrainPilotApp(config, session_factory=factory, samples=sample_source(scripted_samples(4)), discover_user_themes=False)


async def test_override_from_the_chooser_moves_the_real_session(dataset) -> None:  # type: ignore[no-untyped-def]
    sessions: list[TrainingSession] = []
    app = real_app(dataset, sessions)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("p")  # queued now; the core pauses at its first step boundary
        await wait_until(pilot, lambda: app.paused, timeout=60, what="the real session to pause")
        session = sessions[-1]
        start = session.plan
        assert start is not None and start.backend == "cpu"
        target = 1 if start.threads != 1 else 2
        await pilot.press("o")
        await wait_until(pilot, lambda: isinstance(app.screen, BackendChooser))
        chooser = app.screen
        index = next(i for i, o in enumerate(chooser.options) if o.plan == Plan("cpu", threads=target))
        chooser.query_one("OptionList").highlighted = index
        await pilot.press("enter")
        await wait_until(pilot, lambda: "user override -> cpu" in app.main.agent_panel.text, what="the override in the trace")
        assert session.plan == Plan("cpu", threads=target)
        await pilot.press("p")  # resume
        await wait_until(pilot, lambda: not app.running, timeout=60, what="the run to finish")
        assert app.main.run_panel.state == "success"
        first = app.main.run_panel.epochs[0]
        assert first.plan == Plan("cpu", threads=target)
        assert session.finished is not None and session.finished.result["plan_changes"][-1]["source"] == "user"
        assert "predicted switch cost 0µs" in app.main.agent_panel.text


async def test_quitting_a_real_run_saves_a_checkpoint_that_resumes(dataset) -> None:  # type: ignore[no-untyped-def]
    sessions: list[TrainingSession] = []
    app = real_app(dataset, sessions)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("p")
        await wait_until(pilot, lambda: app.paused, timeout=60, what="the real session to pause")
        await pilot.press("q")
        await wait_until(pilot, lambda: isinstance(app.screen, ConfirmQuit))
        await pilot.press("y")
        await wait_until(pilot, lambda: not app.is_running, timeout=60, what="the app to exit")
    session = sessions[-1]
    assert session.finished is not None and session.finished.status == "interrupted"
    checkpoint = Path(session.finished.result["checkpoint"])
    assert checkpoint.exists()
    state = load_checkpoint(checkpoint)
    assert state["run_id"] == session.run_id

    # the app accepts a config with resume=RUN_ID and finishes the run from the checkpoint
    resumed: list[TrainingSession] = []
    app2 = TrainPilotApp(
        SessionConfig(model="mlp", epochs=2, batch_size=32, record_history=False, resume=session.run_id),
        session_factory=partial(_collect, resumed, dataset),
        samples=sample_source(scripted_samples(4)),
        discover_user_themes=False,
    )
    async with app2.run_test(size=SIZE) as pilot:
        await wait_until(pilot, lambda: resumed and resumed[-1].finished is not None and not app2.running, timeout=60, what="the resumed run")
        assert app2.main.run_panel.state == "success"
        assert f"run {session.run_id}" in app2.main.agent_panel.text
        assert "resumed run" in app2.main.agent_panel.text


def _collect(store: list[TrainingSession], dataset, config: SessionConfig) -> TrainingSession:  # type: ignore[no-untyped-def]
    session = TrainingSession(config, dataset=dataset)
    store.append(session)
    return session
