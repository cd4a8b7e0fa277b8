"""The override chooser and plans that differ only by layout or precision: picking one moves the run
to exactly that plan (its settings spelt out to the session), while the direct backend keys leave
the settings to the core."""
from __future__ import annotations

from textual.widgets import OptionList

from trainpilot.plans import CHANNELS_LAST, Plan
from trainpilot_tui.app.screens import BackendChooser

from .conftest import notifications, scripted_app, wait_until
from .scripted import PREDICTIONS, SessionFactory

SIZE = (120, 40)
CONTIGUOUS = Plan("cpu", threads=2)
NHWC = Plan("cpu", threads=2, memory_format=CHANNELS_LAST)
NHWC_BF16 = Plan("cpu", threads=2, memory_format=CHANNELS_LAST, precision="bf16")


def settings_factory(start: Plan = CONTIGUOUS) -> SessionFactory:
    """Sessions whose agent also weighed the 2-thread CPU plan in channels_last, and in bf16."""
    predictions = {**PREDICTIONS, NHWC: 4.5, NHWC_BF16: 4.0}
    return SessionFactory(holds=((1, 3),), start_plan=start, predictions=predictions)


async def held(pilot, factory: SessionFactory) -> None:  # type: ignore[no-untyped-def]
    await wait_until(pilot, lambda: factory.sessions and factory.last.held_at == (1, 3), what="the hold step")
    await pilot.pause()


def already_there(app) -> bool:  # type: ignore[no-untyped-def]
    return any("Already training on cpu×2 · cl" in n for n in notifications(app))


async def pick(pilot, app, plan: Plan) -> None:  # type: ignore[no-untyped-def]
    """Open the chooser, put the cursor on `plan` and press enter."""
    await pilot.press("o")
    await wait_until(pilot, lambda: isinstance(app.screen, BackendChooser), what="the chooser")
    chooser = app.screen
    index = next(i for i, o in enumerate(chooser.options) if o.plan == plan)
    chooser.query_one(OptionList).highlighted = index
    await pilot.press("enter")
    await wait_until(pilot, lambda: not isinstance(app.screen, BackendChooser), what="the chooser to close")


async def test_picking_a_channels_last_plan_asks_the_session_for_exactly_that_plan() -> None:
    factory = settings_factory()
    app = scripted_app(factory)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await held(pilot, factory)
        await pilot.press("o")
        await wait_until(pilot, lambda: isinstance(app.screen, BackendChooser), what="the chooser")
        options = app.screen.query_one(OptionList)
        prompts = [str(options.get_option_at_index(i).prompt) for i in range(options.option_count)]
        assert any("cpu×2 · cl" in p and "predicted 4.50s" in p for p in prompts)
        await pilot.press("escape")
        await wait_until(pilot, lambda: not isinstance(app.screen, BackendChooser), what="the chooser to close")
        await pick(pilot, app, NHWC)
        session = factory.last
        await wait_until(pilot, lambda: session.plan == NHWC, what="the move to channels_last")
        assert session.override_calls == [
            {"backend": "cpu", "threads": 2, "mode": None, "memory_format": "channels_last", "precision": "fp32"}
        ]
        trace = "user override -> cpu×2 · cl"
        await wait_until(pilot, lambda: trace in app.main.agent_panel.text, what="the override in the trace")
        assert any("Moving to cpu×2 · cl" in n for n in notifications(app))
        session.proceed()
        await wait_until(pilot, lambda: not app.running, what="the run to finish")
        first = app.main.run_panel.epochs[0]
        assert [Plan.from_dict(s["plan"]) for s in first.segments] == [CONTIGUOUS, NHWC]
        assert app.main.run_panel.state == "success"


async def test_picking_a_mixed_precision_plan_spells_its_precision() -> None:
    factory = settings_factory()
    app = scripted_app(factory)
    async with app.run_test(size=SIZE) as pilot:
        await held(pilot, factory)
        await pick(pilot, app, NHWC_BF16)
        await wait_until(pilot, lambda: factory.last.plan == NHWC_BF16, what="the move to bf16")
        assert factory.last.override_calls[-1]["memory_format"] == "channels_last"
        assert factory.last.override_calls[-1]["precision"] == "bf16"


async def test_the_contiguous_twin_of_the_current_plan_is_a_move_not_already_there() -> None:
    factory = settings_factory(start=NHWC)
    app = scripted_app(factory)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await held(pilot, factory)
        await pick(pilot, app, CONTIGUOUS)  # same backend and threads; only the layout differs
        await wait_until(pilot, lambda: factory.last.plan == CONTIGUOUS, what="the move back to contiguous")
        assert factory.last.override_calls == [
            {"backend": "cpu", "threads": 2, "mode": None, "memory_format": "contiguous", "precision": "fp32"}
        ]
        assert not any("Already training" in n for n in notifications(app))


async def test_picking_the_current_plan_is_already_there() -> None:
    factory = settings_factory(start=NHWC)
    app = scripted_app(factory)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await held(pilot, factory)
        await pick(pilot, app, NHWC)
        await wait_until(pilot, lambda: already_there(app), what="the already-there notice")
        assert factory.last.override_calls == []


async def test_the_direct_keys_pass_no_settings() -> None:
    factory = settings_factory(start=NHWC)
    app = scripted_app(factory)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await held(pilot, factory)
        await pilot.press("c")  # the CPU, settings unasked: the channels_last plan in use is a CPU plan already
        await wait_until(pilot, lambda: already_there(app), what="the already-there notice")
        assert factory.last.override_calls == []
        await pilot.press("g")
        await wait_until(pilot, lambda: factory.last.plan == Plan("cuda", device="cuda:0"), what="the move to cuda")
        assert factory.last.override_calls == [
            {"backend": "cuda", "threads": None, "mode": None, "memory_format": None, "precision": None}
        ]
