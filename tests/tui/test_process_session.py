"""The app's own default: its session trains in a process of its own (trainpilot/session_process.py).
Started from inside the running app (whose stderr is Textual's capture), steered by keys, and quit
mid-run with a checkpoint the child writes."""
from __future__ import annotations

from pathlib import Path

import pytest

from trainpilot.job.data import write_demo_dataset
from trainpilot.run.session import SessionConfig
from trainpilot.run.process import ProcessSession
from trainpilot_tui.app import TrainPilotApp
from trainpilot_tui.app.screens import ConfirmQuit

from .conftest import wait_until
from .scripted import sample_source, scripted_samples

SIZE = (100, 30)


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> str:
    return str(write_demo_dataset(tmp_path_factory.mktemp("data") / "demo400", n=400, seed=3))


def _app(config: SessionConfig) -> TrainPilotApp:
    # no session_factory: the app's default, the one a user gets
    return TrainPilotApp(config, samples=sample_source(scripted_samples(4)), discover_user_themes=False)


async def test_the_default_session_runs_in_a_child_process_and_finishes(data_dir: str) -> None:
    app = _app(SessionConfig(model="mlp", dataset=data_dir, epochs=2, batch_size=32, record_history=False))
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(pilot, lambda: app.last_status is not None, timeout=90, what="the run to end")
        assert isinstance(app.session, ProcessSession)
        assert app.last_status == "success", app.main.agent_panel.text
        assert app.main.run_panel.state == "success"
        assert len(app.main.run_panel.epochs) == 2
        assert app.session.pid is not None and app.session.finished is not None


async def test_pause_then_quit_stops_the_child_at_a_step_boundary_with_a_checkpoint(data_dir: str) -> None:
    app = _app(SessionConfig(model="mlp", dataset=data_dir, epochs=50, batch_size=32))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("p")  # queued in the child until its first step boundary
        await wait_until(pilot, lambda: app.paused, timeout=90, what="the child to pause")
        await pilot.press("q")
        await wait_until(pilot, lambda: isinstance(app.screen, ConfirmQuit))
        await pilot.press("y")
        await wait_until(pilot, lambda: not app.is_running, timeout=90, what="the app to exit")
    session = app.session
    assert isinstance(session, ProcessSession)
    assert session.finished is not None and session.finished.status == "interrupted"
    assert Path(session.finished.result["checkpoint"]).exists()
