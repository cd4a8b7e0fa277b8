"""Shared helpers for the TUI tests: scripted apps and a wait that polls the app, never sleeps blind."""
from __future__ import annotations

import time
from typing import Any, Callable

import pytest
from textual.pilot import Pilot

from trainpilot.run.session import SessionConfig
from trainpilot_tui.app import TrainPilotApp

from .scripted import SessionFactory, sample_source, scripted_samples


async def wait_until(pilot: Pilot, condition: Callable[[], object], timeout: float = 15.0, what: str = "condition") -> None:
    """Let the app process messages until `condition()` holds (the workers run in threads, so the
    screen catches up in its own time)."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await pilot.pause(0.01)


def notifications(app: TrainPilotApp) -> list[str]:
    return [f"{n.title}: {n.message}" for n in app._notifications]


def scripted_app(
    factory: SessionFactory, *, epochs: int = 3, theme: str | None = None, samples: int = 40, adapt: str = "on",
    **options: Any,
) -> TrainPilotApp:
    options.setdefault("discover_user_themes", False)  # the developer's ./themes must not leak in
    options.setdefault("settle_s", 0.0)  # scripted sessions: no start-up load to wait out
    return TrainPilotApp(
        SessionConfig(epochs=epochs, adapt=adapt),
        theme=theme,
        session_factory=factory,
        samples=sample_source(scripted_samples(samples)),
        **options,
    )


@pytest.fixture
def factory() -> SessionFactory:
    return SessionFactory(holds=((1, 3),))


@pytest.fixture(autouse=True)
def two_cpus(monkeypatch: pytest.MonkeyPatch) -> None:
    """The scripted plans train on 2 CPU threads: on a 2-CPU machine (this one, CI) that holds every
    core and the app slows its refresh (pace.py). Pinned, so screens and traces do not depend on
    the machine that runs the tests."""
    monkeypatch.setattr("trainpilot_tui.app.pace.usable_cpus", lambda: 2)
