"""The plan and who chose it, pinned on the Run panel: the agent's decision with its confidence, a
re-plan by the agent mid-run, the user's override (which pins the plan) and the key that hands it
back; and the epoch table's rows for an epoch the agent split."""
from __future__ import annotations

from trainpilot import events as ev
from trainpilot.plans import Plan
from trainpilot_tui.app.app import RELEASE_KEY
from trainpilot_tui.app.decision import Decision, adaptation_off, is_hand_back, plan_line
from trainpilot_tui.app.trace import entries_for
from trainpilot_tui.app.widgets.epoch_table import epoch_rows

from .conftest import notifications, scripted_app, wait_until
from .scripted import PINNED, SessionFactory

CPU1, CPU2 = Plan("cpu", threads=1), Plan("cpu", threads=2)
SIZE = (120, 40)


def chosen(plan: Plan, source: str, confidence: float | None = None, trigger: str | None = None) -> ev.BackendChosen:
    return ev.BackendChosen("r", plan, confidence, source, "why", 6.0, None, trigger=trigger, at=0.0)


def line(decision: Decision | None, key: str | None = "h", width: int | None = None) -> str:
    return plan_line(decision, key, width).plain


def test_the_line_says_who_chose_the_plan() -> None:
    assert line(Decision.of(chosen(CPU2, "agent", 0.95), None)) == "plan cpu×2 · agent · confidence 0.95"
    replan = Decision.of(chosen(CPU1, "replan", trigger="load"), 16)
    assert line(replan) == "plan cpu×1 · replan (load) · moved at epoch 16"
    override = Decision.of(chosen(CPU1, "user"), 3)
    assert line(override) == "plan cpu×1 · yours (override: h hands it back)"
    assert line(override, key=None) == "plan cpu×1 · yours (override)"  # adaptation off: nothing to hand back
    assert line(Decision.of(chosen(CPU1, "user"), None)) == "plan cpu×1 · yours (your choice: h hands it back)"
    assert line(override.handed_back()) == "plan cpu×1 · agent (handed back)"
    assert line(Decision.of(chosen(CPU2, "fallback"), 2)) == "plan cpu×2 · fallback"
    assert line(None) == ""


def test_a_narrow_panel_gets_the_compact_line() -> None:
    replan = Decision.of(chosen(CPU1, "replan", trigger="pace"), 16)
    assert line(replan, width=42) == "plan cpu×1 · replan (pace) at epoch 16"
    assert line(Decision.of(chosen(CPU1, "user"), 3), width=42) == "plan cpu×1 · yours (h hands it back)"
    assert line(replan, width=60) == "plan cpu×1 · replan (pace) · moved at epoch 16"  # it fits: the full form
    agent = Decision.of(chosen(CPU2, "agent", 0.8), None)
    assert line(agent, width=42) == "plan cpu×2 · agent · confidence 0.80"  # the plan is short in both
    split = Decision.of(chosen(Plan.split((CPU1, CPU1)).with_settings("channels_last"), "agent", 0.67), None)
    assert line(split, width=42) == "plan split 1+1 · cl · agent · conf. 0.67"  # the confidence stays in sight
    moved = Decision.of(chosen(CPU2.with_settings("channels_last"), "replan", trigger="verify"), 6)
    assert line(moved, width=40) == "plan cpu×2 · cl · replan (verify)"  # too narrow for the epoch: who moved it, still
    assert all(len(line(d, width=42)) <= 42 for d in (replan, agent))


def test_the_core_says_when_the_run_is_handed_back_or_never_moves() -> None:
    def act(text: str, **data: str) -> ev.AgentStepped:
        return ev.AgentStepped("r", "act", text, None, data, at=0.0)

    assert is_hand_back(act("you handed the run back: the agent decides again", adapt="released"))
    assert not is_hand_back(act("the run is already the agent's: nothing pinned it"))
    assert adaptation_off(act("adaptation off (--adapt off): ...", adapt="off"))
    assert not adaptation_off(act(PINNED, adapt="pinned"))


def test_the_trace_says_a_replan_and_why() -> None:
    [entry] = entries_for(chosen(CPU1, "replan", trigger="load"))
    assert entry.kind == "decision"
    assert entry.text == "train on cpu×1 (re-planned: load); predicted 6.00s for the rest of the run"


def test_an_epoch_the_agent_split_gets_a_row_per_plan_as_an_override_does() -> None:
    # Segments carry no source: a replan's split epoch shows exactly as an override's.
    segments = (
        {"plan": CPU2.to_dict(), "steps": 5, "actual_s": 1.0, "predicted_s": 0.9},
        {"plan": CPU1.to_dict(), "steps": 5, "actual_s": 1.0, "predicted_s": 1.5},
    )
    split = ev.EpochTimed("r", 16, 0.2, 0.9, 0.85, 2.4, 2.0, CPU1, segments, at=0.0)
    compact = epoch_rows((split,), compact=True)
    assert [row[:2] for row in compact[1:3]] == [("↳", "cpu×2"), ("↳", "cpu×1")]
    full = epoch_rows((split,))
    assert [row[-1] for row in full[1:3]] == ["↳ cpu×2", "↳ cpu×1"]


async def test_a_replan_updates_the_pinned_line_and_splits_its_epoch_in_the_table() -> None:
    factory = SessionFactory(replans=((2, 5, CPU1, "load"),), holds=((1, 3), (3, 2)))
    app = scripted_app(factory)
    async with app.run_test(size=SIZE) as pilot:
        panel = app.main.run_panel
        await wait_until(pilot, lambda: factory.sessions and factory.last.held_at == (1, 3), what="epoch 1, step 3")
        await wait_until(pilot, lambda: panel.decision is not None, what="the agent's decision")
        assert plan_text(app) == "plan cpu×2 · agent · confidence 0.80"
        factory.last.proceed()
        await wait_until(pilot, lambda: factory.last.held_at == (3, 2), what="epoch 3, step 2")
        await wait_until(pilot, lambda: len(panel.epochs) == 2, timeout=20, what="epoch 2's figures")
        assert plan_text(app) == "plan cpu×1 · replan (load) · moved at epoch 2"
        assert [s["plan"]["threads"] for s in panel.epochs[1].segments] == [2, 1]
        table = [str(cell) for row in epoch_rows(panel.epochs) for cell in row]
        assert "↳ cpu×2" in table and "↳ cpu×1" in table
        assert not app.pinned and not footer_offers_hand_back(app)  # the agent's move: nothing to hand back
        factory.last.proceed()
        await wait_until(pilot, lambda: not app.running, what="the run to finish")


async def test_the_release_key_hands_an_overridden_run_back_to_the_agent(factory: SessionFactory) -> None:
    app = scripted_app(factory)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await wait_until(pilot, lambda: factory.sessions and factory.last.held_at == (1, 3), what="the hold")
        session = factory.last
        assert not footer_offers_hand_back(app)
        await pilot.press(RELEASE_KEY)  # the agent's plan: the key does nothing
        assert session.release_calls == 0
        await pilot.press("g")  # an override to cuda, which pins the plan
        await wait_until(pilot, lambda: app.pinned, what="the override")
        await wait_until(pilot, lambda: "h hands it back" in plan_text(app), what="the pinned line")
        assert footer_offers_hand_back(app)
        assert "Hand the run back to the agent" in [c.title for c in app.get_system_commands(app.screen)]
        await pilot.press(RELEASE_KEY)
        assert session.release_calls == 1
        assert any(n.startswith("Handed back") for n in notifications(app))
        await wait_until(pilot, lambda: not app.pinned, what="the core's answer")
        await wait_until(pilot, lambda: "you handed the run back" in app.main.agent_panel.text, what="the trace")
        assert not footer_offers_hand_back(app)
        session.proceed()
        await wait_until(pilot, lambda: not app.running, what="the run to finish")


async def test_the_agent_moving_the_run_back_after_a_hand_back_shows_on_the_pinned_line() -> None:
    factory = SessionFactory(holds=((1, 3),))
    app = scripted_app(factory)
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(pilot, lambda: factory.sessions and factory.last.held_at == (1, 3), what="the hold")
        factory.last.override_backend("cpu", 1)
        await wait_until(pilot, lambda: app.pinned, what="the override")
        await pilot.press(RELEASE_KEY)
        await wait_until(pilot, lambda: "replan (release)" in plan_text(app), what="the agent's move, on the line")
        assert plan_text(app) == "plan cpu×2 · replan (release) · moved at epoch 1"
        assert app.main.run_panel.plan == CPU2
        factory.last.proceed()
        await wait_until(pilot, lambda: not app.running, what="the run to finish")
        assert plan_text(app) == "plan cpu×2 · replan (release) · moved at epoch 1"


async def test_with_adaptation_off_there_is_nothing_to_hand_back(factory: SessionFactory) -> None:
    app = scripted_app(factory, adapt="off")
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(pilot, lambda: factory.sessions and factory.last.held_at == (1, 3), what="the hold")
        await wait_until(pilot, lambda: not app.adapting, what="the core's word that the plan stays")
        await pilot.press("g")
        await wait_until(pilot, lambda: app.pinned, what="the override")
        await wait_until(pilot, lambda: plan_text(app) == "plan cuda:0 · yours (override)", what="the line")
        assert not footer_offers_hand_back(app)
        await pilot.press(RELEASE_KEY)
        assert factory.last.release_calls == 0
        factory.last.proceed()
        await wait_until(pilot, lambda: not app.running, what="the run to finish")


def plan_text(app) -> str:  # type: ignore[no-untyped-def]
    return app.main.run_panel.query_one("#run-plan").content.plain


def footer_offers_hand_back(app) -> bool:  # type: ignore[no-untyped-def]
    shown = (b for b in app.screen.active_bindings.values() if b.binding.show and b.enabled)
    return any(b.binding.key == RELEASE_KEY for b in shown)
