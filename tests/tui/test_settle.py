"""The app starts the run only once its own start-up is over, and tells the session the load it
adds while settled and how often it paints progress (start-up rendering landed inside mlp's 0.06 s epochs, and
the agent, glancing at the machine while the app was still starting, picked fewer threads)."""
from __future__ import annotations

import time
from typing import Any

from trainpilot.run.session import SessionConfig
from trainpilot_tui.app import TrainPilotApp

from .conftest import wait_until
from .scripted import ScriptedSession, sample_source, scripted_samples

SIZE = (120, 40)


class StatingSession(ScriptedSession):
    """A scripted session that takes the UI's steady load, as TrainingSession does."""

    def expect_ui_load(self, cores: float) -> None:
        self.told = cores

    def show_progress_every(self, seconds: float) -> None:
        self.paced.append(seconds)

    def __post_init__(self) -> None:
        super().__post_init__()
        self.paced: list[float] = []

    def events(self):  # type: ignore[no-untyped-def]
        self.started_at = time.perf_counter()
        yield from super().events()


async def test_the_run_starts_after_the_first_frame_and_settling_with_the_steady_load_stated() -> None:
    made: list[tuple[float, StatingSession]] = []

    def factory(config: SessionConfig) -> Any:
        made.append((time.perf_counter(), StatingSession(config)))
        return made[-1][1]

    app = TrainPilotApp(SessionConfig(epochs=1), session_factory=factory, samples=sample_source(scripted_samples(8)),
                        discover_user_themes=False, settle_s=0.4)
    async with app.run_test(size=SIZE) as pilot:
        mounted = time.perf_counter()
        await wait_until(pilot, lambda: made and hasattr(made[0][1], "started_at"), what="the run to start")
        _created, session = made[0]
        assert session.started_at - mounted >= 0.3  # not at mount: after the first frame and the settle time
        assert app.ui_steady_cores is not None and 0.0 <= app.ui_steady_cores < 1.5
        assert session.told == app.ui_steady_cores  # the agent plans for the app's steady load
        # step progress comes no faster than the app paints it: at the default 1 Hz, a step event a
        # second, then one in two once the plan (cpu, 2 threads, on 2 CPUs) holds every core. The
        # second comes when the app has handled the session's plan event, which can be after
        # events() has begun: wait for it rather than race it.
        await wait_until(pilot, lambda: len(session.paced) >= 2, what="the pace for the chosen plan")
        assert session.paced == [1.0 / app.refresh_hz, 2.0 / app.refresh_hz]
        await wait_until(pilot, lambda: not app.running, what="the run's end")
