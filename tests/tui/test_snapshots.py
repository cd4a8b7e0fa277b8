"""Snapshots of the main screen for each shipped theme (the two built in, and the theme files in
themes/) at 80x24 and 160x48.

The session is scripted and held mid-run in epoch 3 after a user override in epoch 2 (so the table
and chart show a split epoch), and the Hardware panel is fed a fixed list of samples: nothing on
screen depends on this machine or on timing. Update with `pytest --snapshot-update tests/tui`.

And the end of a longer run at 80x24, once the trace has scrolled past the agent's decision: the
Run panel's plan line still says who chose the plan (the agent, with its confidence, or the agent's
re-plan mid-run).
"""
from __future__ import annotations

from pathlib import Path

import pytest

from trainpilot.plans import Plan
from trainpilot_tui.app.themes import DEFAULT_THEME, SHIPPED_THEMES, load_theme_file
from trainpilot_tui.app.widgets.core_bars import CoreBars
from trainpilot_tui.app.widgets.core_bars import layout as core_rows

from .conftest import scripted_app, wait_until
from .scripted import SessionFactory


async def _samples_shown(pilot) -> None:  # type: ignore[no-untyped-def]
    hardware = pilot.app.main.hardware_panel
    await wait_until(pilot, lambda: len(hardware.history) == 40, what="all samples")
    cores = hardware.query_one(CoreBars)
    await wait_until(
        pilot,
        lambda: cores.per_core == hardware.history[-1].per_core and cores.size.height == core_rows(len(cores.per_core), cores.size.width)[2],
        what="the core bars laid out for the last sample",
    )


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
    await _samples_shown(pilot)
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


@pytest.mark.parametrize("replans", [(), ((16, 5, Plan("cpu", threads=1), "load"),)], ids=["agent", "replan"])
def test_the_plan_line_outlives_the_trace_at_80x24(snap_compare, replans: tuple) -> None:  # type: ignore[no-untyped-def]
    factory = SessionFactory(replans=replans)
    app = scripted_app(factory, epochs=20, theme=DEFAULT_THEME)

    async def run_before(pilot) -> None:  # type: ignore[no-untyped-def]
        main = pilot.app.main
        await wait_until(pilot, lambda: main.run_panel.state == "success", timeout=60, what="the run's end")
        trace = main.agent_panel
        await wait_until(pilot, lambda: trace.scroll_y == trace.max_scroll_y > 0, what="the trace at its newest entry")
        await _samples_shown(pilot)
        await pilot.pause()
        shown = [trace.render_line(y).text for y in range(trace.scrollable_content_region.height)]
        assert not any("confidence" in line for line in shown)  # the decision has scrolled out of the trace
        plan = main.run_panel.query_one("#run-plan").content.plain
        expected = "plan cpu×1 · replan (load) at epoch 16" if replans else "plan cpu×2 · agent · confidence 0.80"
        assert plan == expected

    assert snap_compare(app, terminal_size=(80, 24), run_before=run_before)
