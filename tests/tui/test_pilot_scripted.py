"""Pilot tests on scripted, deterministic sessions: the keys steer the core session, and the screen
shows what the core answered."""
from __future__ import annotations

from textual.widgets import OptionList

from trainpilot.plans import Plan
from trainpilot_tui.app.screens import BackendChooser, ConfirmQuit, RunPicker

from .conftest import notifications, scripted_app, wait_until
from .scripted import RUN_ID, SessionFactory

SIZE = (120, 40)


async def held(pilot, factory: SessionFactory) -> None:  # type: ignore[no-untyped-def]
    await wait_until(pilot, lambda: factory.sessions and factory.last.held_at == (1, 3), what="the session to reach its hold step")
    await pilot.pause()


async def test_override_key_moves_the_core_session_and_the_trace_says_user_override(factory: SessionFactory) -> None:
    app = scripted_app(factory)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await held(pilot, factory)
        await pilot.press("g")  # cuda
        await wait_until(pilot, lambda: "user override -> cuda" in app.main.agent_panel.text, what="the override in the trace")
        session = factory.last
        assert session.plan == Plan("cuda", device="cuda:0")
        assert "predicted switch cost 50ms" in app.main.agent_panel.text
        assert any("Moving to cuda" in n for n in notifications(app))
        assert app.main.run_panel.plan == session.plan
        session.proceed()
        await wait_until(pilot, lambda: not app.running, what="the run to finish")
        first = app.main.run_panel.epochs[0]
        assert [s["plan"]["backend"] for s in first.segments] == ["cpu", "cuda"]  # both segments kept
        assert [s["steps"] for s in first.segments] == [3, 7]
        assert app.main.run_panel.state == "success"


async def test_chooser_shows_predictions_and_disables_unavailable_plans_with_the_reason(factory: SessionFactory) -> None:
    app = scripted_app(factory)
    async with app.run_test(size=SIZE) as pilot:
        await held(pilot, factory)
        await pilot.press("o")
        await wait_until(pilot, lambda: isinstance(app.screen, BackendChooser), what="the chooser")
        options = app.screen.query_one(OptionList)
        prompts = [str(options.get_option_at_index(i).prompt) for i in range(options.option_count)]
        disabled = [options.get_option_at_index(i).disabled for i in range(options.option_count)]
        assert "predicted 9.00s" in prompts[0] and "cpu×1" in prompts[0]
        assert "(current)" in prompts[1] and "(current)" not in prompts[0]
        assert "n/a: not Apple Silicon" in prompts[3] and "n/a: not macOS" in prompts[4]
        assert disabled == [False, False, False, True, True]
        assert options.highlighted == 1  # the cursor starts on the plan in use
        await pilot.press("up", "enter")
        await wait_until(pilot, lambda: not isinstance(app.screen, BackendChooser))
        await wait_until(pilot, lambda: factory.last.plan == Plan("cpu", threads=1), what="the move to one thread")
        await wait_until(pilot, lambda: "user override -> cpu×1; predicted switch cost 0µs" in app.main.agent_panel.text)


async def test_override_to_an_unavailable_backend_is_refused_with_the_reason(factory: SessionFactory) -> None:
    app = scripted_app(factory)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await held(pilot, factory)
        before = factory.last.plan
        await pilot.press("a")  # ane: not on this (scripted) machine
        await wait_until(pilot, lambda: "override to ane refused: not Apple Silicon" in app.main.agent_panel.text, what="the refusal in the trace")
        assert any("Override refused: ane: not Apple Silicon" in n for n in notifications(app))
        assert factory.last.plan == before
        assert app.running and not app.stopping  # nothing lost: the run goes on
        factory.last.proceed()
        await wait_until(pilot, lambda: app.main.run_panel.state == "success")
        assert len(app.main.run_panel.epochs) == 3


async def test_pause_and_resume_from_the_keyboard(factory: SessionFactory) -> None:
    app = scripted_app(factory)
    async with app.run_test(size=SIZE) as pilot:
        await held(pilot, factory)
        await pilot.press("p")
        await wait_until(pilot, lambda: app.paused, what="SessionPaused")
        assert factory.last.paused
        assert app.main.run_panel.state == "paused"
        assert "paused at epoch 1, step 3" in app.main.agent_panel.text
        factory.last.proceed()  # let go, but paused: it must not move on
        await pilot.pause()
        assert app.main.run_panel.progress.step == 3
        await pilot.press("p")
        await wait_until(pilot, lambda: app.main.run_panel.state == "success", what="the run to finish after resuming")
        assert "resumed at epoch 1, step 3" in app.main.agent_panel.text
        assert not factory.last.paused


async def test_quitting_mid_run_asks_then_checkpoints_before_exiting(factory: SessionFactory) -> None:
    app = scripted_app(factory)
    async with app.run_test(size=SIZE) as pilot:
        await held(pilot, factory)
        await pilot.press("q")
        await wait_until(pilot, lambda: isinstance(app.screen, ConfirmQuit), what="the confirmation")
        await pilot.press("n")  # keep training
        await wait_until(pilot, lambda: not isinstance(app.screen, ConfirmQuit))
        assert factory.last.stop_reason is None and app.is_running
        await pilot.press("q")
        await wait_until(pilot, lambda: isinstance(app.screen, ConfirmQuit))
        await pilot.press("y")
        await wait_until(pilot, lambda: not app.is_running, what="the app to exit after the checkpoint")
    session = factory.last
    assert session.stop_reason == "quit"
    assert session.checkpoints[-1].reason == "interrupt" and (session.checkpoints[-1].epoch, session.checkpoints[-1].step) == (0, 3)
    assert session.finished is not None and session.finished.status == "interrupted"
    assert app.return_value == 0


async def test_quit_between_runs_exits_at_once() -> None:
    factory = SessionFactory()
    app = scripted_app(factory, epochs=1)
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(pilot, lambda: factory.sessions and factory.last.finished is not None and not app.running)
        await pilot.press("q")
        await wait_until(pilot, lambda: not app.is_running)
    assert factory.last.stop_reason is None


async def test_new_run_from_the_picker_stops_the_current_run_and_starts_the_chosen_one(factory: SessionFactory, tmp_path) -> None:  # type: ignore[no-untyped-def]
    app = scripted_app(factory)
    async with app.run_test(size=SIZE) as pilot:
        await held(pilot, factory)
        await pilot.press("n")
        await wait_until(pilot, lambda: isinstance(app.screen, RunPicker))
        picker = app.screen
        picker.query_one("#dataset").value = str(tmp_path / "missing")
        await pilot.click("#start")
        await wait_until(pilot, lambda: "no such file or directory" in str(picker.query_one("#problem").render()))
        picker.query_one("#dataset").value = ""
        picker.query_one("#epochs").value = "1"
        assert picker.query_one("#objective").value == "time"  # the objective is shown, and can be changed
        picker.query_one("#objective").value = "energy"
        picker.query_one("#epochs").focus()
        await pilot.press("enter")  # submitting from the keyboard works too
        await wait_until(pilot, lambda: len(factory.sessions) == 2, what="the second run")
        assert factory.sessions[0].stop_reason == "new run"
        assert factory.sessions[0].finished.status == "interrupted"
        assert factory.last.config.epochs == 1 and factory.last.config.resume is None
        assert factory.last.config.objective == "energy"
        factory.last.proceed()
        await wait_until(pilot, lambda: app.main.run_panel.state == "success")
        assert len(app.main.run_panel.epochs) == 1


async def test_replan_mid_run_resumes_the_run_from_its_checkpoint_under_a_new_plan(factory: SessionFactory) -> None:
    app = scripted_app(factory)
    async with app.run_test(size=SIZE) as pilot:
        await held(pilot, factory)
        await pilot.press("r")
        await wait_until(pilot, lambda: len(factory.sessions) == 2, what="the re-planned session")
        assert factory.sessions[0].stop_reason == "re-plan"
        assert factory.last.config.resume == RUN_ID


async def test_theme_key_cycles_the_shipped_themes(factory: SessionFactory) -> None:
    app = scripted_app(factory)
    async with app.run_test(size=SIZE) as pilot:
        assert app.theme == "trainpilot-dark"
        await pilot.press("t")
        assert app.theme == "trainpilot-light"
        await pilot.press("t")
        assert app.theme == "trainpilot-dark"


async def test_command_palette_offers_every_action(factory: SessionFactory) -> None:
    app = scripted_app(factory)
    async with app.run_test(size=SIZE) as pilot:
        await held(pilot, factory)
        titles = [c.title for c in app.get_system_commands(app.screen)]
        for expected in ("Override backend…", "Override: move the run to cuda", "Pause training", "New run…", "Re-plan", "Cycle theme", "Quit"):
            assert expected in titles
        # the footer shows the chooser, pause, new run, re-plan, theme and quit keys
        shown = {b.binding.key: b.binding.description for b in app.screen.active_bindings.values() if b.binding.show and b.enabled}
        assert shown["o"] == "Override" and shown["p"] == "Pause" and shown["q"] == "Quit"


async def test_the_hardware_panel_shows_samples_backends_and_estimates(factory: SessionFactory) -> None:
    app = scripted_app(factory)
    async with app.run_test(size=SIZE) as pilot:
        await held(pilot, factory)
        await wait_until(pilot, lambda: app.main.hardware_panel.sample is not None and len(app.main.hardware_panel.history) == 40)
        panel = app.main.hardware_panel
        backends = str(panel.query_one("#backends").render())
        assert "active · 2 threads" in backends and "n/a: not Apple Silicon" in backends and "idle" in backends
        readings = str(panel.query_one("#readings").render())
        assert "1.2 W, est." in readings and "n/a: no sampler for this GPU" in readings


async def test_the_trace_follows_the_newest_entry_until_the_user_scrolls_up_and_survives_a_resize(factory: SessionFactory) -> None:
    app = scripted_app(factory)
    async with app.run_test(size=(160, 48)) as pilot:
        await held(pilot, factory)
        await pilot.resize_terminal(80, 24)
        await pilot.pause()
        panel = app.main.agent_panel
        await wait_until(pilot, lambda: panel.max_scroll_y > 0 and panel.scroll_y == panel.max_scroll_y, what="the trace to show its newest entry at 80x24")
        panel.scroll_home(animate=False)
        await pilot.pause()
        assert not panel.following
        await pilot.press("a")  # a refusal adds a line; the user's position stays
        await wait_until(pilot, lambda: "refused" in panel.text)
        await pilot.pause()
        assert panel.scroll_y == 0
        panel.scroll_end(animate=False)
        await pilot.pause()
        assert panel.following
