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
from trainpilot_tui.app.widgets.core_bars import CoreBars
from trainpilot_tui.app.widgets.core_bars import layout as core_rows

from .conftest import scripted_app, wait_until
from .scripted import SessionFactory


async def _settle(pilot, factory: SessionFactory) -> None:  # type: ignore[no-untyped-def]
    """Move the run to cuda at epoch 2, step 4, then let it run on to epoch 3, step 6, and wait
    until the screen shows it all. The session and sampler threads run ahead of the screen, so
    each wait is for what the snapshot shows, on the screen, not for the threads' state."""
    main = pilot.app.main
    await wait_until(pilot, lambda: factory.sessions and factory.last.held_at == (2, 4), what="epoch 2, step 4")
    session = factory.last
    session.override_backend("cuda")
    # handled on screen: epoch 1's figures painted first, then the override and the pace line
    await wait_until(pilot, lambda: main.run_panel.plan is not None and main.run_panel.plan.backend == "cuda", what="the override on screen")
    session.proceed()
    await wait_until(pilot, lambda: session.held_at == (3, 6), what="epoch 3, step 6")
    await wait_until(pilot, lambda: (p := main.run_panel.progress) is not None and (p.epoch, p.step) == (3, 6), what="epoch 3, step 6 on screen")
    # the per-epoch figures are painted at most every figures_interval_s: wait for all of epoch 2's
    await wait_until(
        pilot,
        lambda: len(main.run_panel.epochs) == 2 and main.run_panel.message == "checkpoint after epoch 2",
        timeout=10,
        what="epoch 2's figures",
    )
    hardware = main.hardware_panel
    await wait_until(pilot, lambda: len(hardware.history) == 40, what="all samples")
    cores = hardware.query_one(CoreBars)
    await wait_until(
        pilot,
        lambda: cores.per_core == hardware.history[-1].per_core and cores.size.height == core_rows(len(cores.per_core), cores.size.width)[2],
        what="the core bars laid out for the last sample",
    )
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
