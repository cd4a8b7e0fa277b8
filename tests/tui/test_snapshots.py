"""Snapshots of the main screen for each shipped theme (the two built in, and the theme files in
themes/) at 80x24 and 160x48.

The session is scripted and held mid-run in epoch 3 after a user override in epoch 2 (so the table
and chart show a split epoch), and the Hardware panel is fed a fixed list of samples: nothing on
screen depends on this machine or on timing. Update with `pytest --snapshot-update tests/tui`.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from trainpilot_tui.app.themes import SHIPPED_THEMES, load_theme_file

from .conftest import scripted_app, wait_until
from .scripted import SessionFactory


async def _settle(pilot, factory: SessionFactory) -> None:  # type: ignore[no-untyped-def]
    """Move the run to cuda at epoch 2, step 4, then let it run on to epoch 3, step 6."""
    app = pilot.app
    await wait_until(pilot, lambda: factory.sessions and factory.last.held_at == (2, 4), what="epoch 2, step 4")
    session = factory.last
    session.override_backend("cuda")
    await wait_until(pilot, lambda: session.plan is not None and session.plan.backend == "cuda")
    session.release()
    await wait_until(pilot, lambda: session.held_at == (3, 6), what="epoch 3, step 6")
    await wait_until(pilot, lambda: len(app.main.hardware_panel.history) == 40, what="all samples")
    await wait_until(pilot, lambda: app.main.run_panel.progress is not None and app.main.run_panel.progress.step == 6)
    # the per-epoch figures are painted at most every figures_interval_s: wait for epoch 2's
    await wait_until(pilot, lambda: len(app.main.run_panel.epochs) == 2, timeout=10, what="epoch 2's figures")
    await pilot.pause()


THEME_FILES = sorted((Path(__file__).resolve().parents[2] / "themes").glob("*.toml"))
THEMES = [t.name for t in SHIPPED_THEMES] + [p.stem for p in THEME_FILES]


@pytest.mark.parametrize("size", [(80, 24), (160, 48)], ids=["80x24", "160x48"])
@pytest.mark.parametrize("theme", THEMES)
def test_main_screen(snap_compare, theme: str, size: tuple[int, int]) -> None:  # type: ignore[no-untyped-def]
    factory = SessionFactory(holds=((2, 4), (3, 6)))
    app = scripted_app(factory, theme=theme, extra_themes=[load_theme_file(p) for p in THEME_FILES])

    async def run_before(pilot) -> None:  # type: ignore[no-untyped-def]
        await _settle(pilot, factory)

    assert snap_compare(app, terminal_size=size, run_before=run_before)
