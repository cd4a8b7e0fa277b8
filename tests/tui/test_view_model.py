"""The pure parts of the screen: wording of the trace, the plan book, figures, and the drawing
helpers of the small widgets."""
from __future__ import annotations

from trainpilot import events as ev
from trainpilot.plans import Plan
from trainpilot_tui.app import format as fmt
from trainpilot_tui.app.plan_book import PlanBook
from trainpilot_tui.app.trace import entries_for, step_details
from trainpilot_tui.app.widgets.core_bars import layout
from trainpilot_tui.app.widgets.epoch_table import epoch_rows, run_totals
from trainpilot_tui.app.widgets.pva_chart import dual_bar, run_segments
from trainpilot_tui.app.widgets.trend import trend_rows

CPU2 = Plan("cpu", threads=2)
CUDA = Plan("cuda", device="cuda:0")


def epoch(n: int, predicted: float | None, actual: float, segments: tuple = (), plan: Plan = CPU2) -> ev.EpochTimed:
    return ev.EpochTimed("r", n, 1.0, 0.5, 0.4, predicted, actual, plan, segments, at=0.0)


def test_figures() -> None:
    assert [fmt.seconds(v) for v in (None, 0.0004, 0.0052, 0.0184, 3.2, 42.0, 75.0, 7300.0)] == ["n/a", "400µs", "5.2ms", "18ms", "3.20s", "42.0s", "1m15s", "2h01m"]
    assert fmt.size(512 * 1024**2) == "512 MiB" and fmt.size(6.2 * 1024**3) == "6.2 GiB"
    assert fmt.error(2.0, 3.06) == "+53%" and fmt.error(None, 1.0) == "n/a" and fmt.error(2.0, 1.0) == "-50%"


def test_trace_wording_for_user_override_refusal_and_epochs() -> None:
    user = ev.BackendChosen("r", CUDA, None, "user", "user override to cuda", 3.0, 0.05, at=0.0)
    [entry] = entries_for(user)
    assert (entry.phase, entry.kind) == ("act", "user")
    assert entry.text == "user override -> cuda:0; predicted switch cost 50ms; predicted 3.00s for the rest of the run"
    [refused] = entries_for(ev.OverrideRefused("r", "ane", "not Apple Silicon", at=0.0))
    assert (refused.kind, refused.text) == ("refused", "override to ane refused: not Apple Silicon")
    split = epoch(2, 1.4, 1.52, ({"plan": CPU2.to_dict(), "steps": 4, "actual_s": 0.8, "predicted_s": 0.8}, {"plan": CUDA.to_dict(), "steps": 6, "actual_s": 0.72, "predicted_s": 0.6}))
    assert entries_for(split)[0].text == "epoch 2: predicted 1.40s, actual 1.52s (+9%) in 2 segments; loss 1.000"
    assert entries_for(ev.CheckpointSaved("r", "/p", 1, 0, "epoch", at=0.0)) == []
    assert entries_for(ev.CheckpointSaved("r", "/p", 1, 3, "interrupt", at=0.0))[0].kind == "checkpoint"


def test_agent_step_details_flat_or_nested() -> None:
    nested = ev.AgentStepped("r", "think", "t", None, {"data": {"plan": CPU2.to_dict(), "predicted_s": 1.0}}, at=0.0)
    flat = ev.AgentStepped("r", "think", "t", None, {"plan": CPU2.to_dict(), "excluded": "why"}, at=0.0)
    assert step_details(nested)["predicted_s"] == 1.0 and step_details(flat)["excluded"] == "why"
    assert entries_for(flat)[0].kind == "excluded"


def test_plan_book_collects_predictions_exclusions_and_backend_states() -> None:
    book = PlanBook()
    book.update(ev.HardwareObserved("r", {}, {"backends": {"cpu": "available", "ane": "n/a: not Apple Silicon", "cuda": "available"}}, "obs", at=0.0))
    book.update(ev.AgentStepped("r", "think", "cpu", None, {"data": {"plan": CPU2.to_dict(), "predicted_s": 6.0}}, at=0.0))
    book.update(ev.AgentStepped("r", "think", "ane", None, {"data": {"plan": Plan("ane").to_dict(), "excluded": "not Apple Silicon"}}, at=0.0))
    book.update(ev.AgentStepped("r", "think", "decision", 0.8, {"plan": CPU2.to_dict(), "policy": "rules"}, at=0.0))
    book.update(ev.BackendChosen("r", CPU2, 0.8, "agent", "why", 6.0, None, at=0.0))
    options = {o.plan.backend: o for o in book.plan_options()}
    assert options["cpu"].predicted_s == 6.0 and options["cpu"].available
    assert options["ane"].excluded_reason == "not Apple Silicon"
    assert options["mps"].available and options["mps"].predicted_s is None  # never mentioned: the core decides
    states = {s.name: (s.state, s.detail) for s in book.backend_states()}
    assert states == {"cpu": ("active", "2 threads"), "ane": ("n/a", "not Apple Silicon"), "cuda": ("idle", "")}


def test_trend_is_on_an_absolute_scale_newest_right() -> None:
    assert trend_rows([50.0, 50.0], 4, 1, 100.0) == ["  ▄▄"]
    assert trend_rows([100.0, 0.0, 1.0], 3, 2, 100.0) == ["█  ", "█ ▁"]
    assert trend_rows([], 3, 1, None) == ["   "]


def test_core_bars_flow_into_columns_then_a_strip() -> None:
    assert layout(2, 30) == ("bars", 2, 1)
    assert layout(4, 30) == ("bars", 2, 2)
    assert layout(64, 76)[0] == "strip"


def test_dual_bar_top_is_predicted_bottom_is_actual_split_at_segments() -> None:
    bar = dual_bar(2.0, [1.0, 1.0], 4.0, 8)
    assert bar.plain == "▀▀▀▀    "
    styles = {i: str(span.style) for span in bar.spans for i in range(span.start, span.end)}
    assert styles[0] == styles[1] != styles[2] == styles[3]  # the colour changes at the segment boundary
    assert "on" in styles[0] and 4 not in styles  # top and bottom both filled, then nothing
    assert dual_bar(1.0, [3.0], 4.0, 4).plain == "▀▄▄ "


def test_run_row_splits_only_where_the_plan_changed() -> None:
    a = epoch(1, 1.0, 1.0)
    b = epoch(2, 1.0, 1.2, ({"plan": CPU2.to_dict(), "steps": 4, "actual_s": 0.5}, {"plan": CUDA.to_dict(), "steps": 6, "actual_s": 0.7}), plan=CUDA)
    c = epoch(3, 1.0, 0.9, plan=CUDA)
    assert run_segments((a, b, c)) == [1.5, 1.6]
    assert run_totals((a, b, c)) == (3.0, 3.1)
    assert run_totals((a, epoch(2, None, 1.0)))[0] is None


def test_epoch_rows_keep_both_segments_of_a_split_epoch() -> None:
    b = epoch(2, 1.4, 1.52, ({"plan": CPU2.to_dict(), "steps": 4, "actual_s": 0.8, "predicted_s": 0.8}, {"plan": CUDA.to_dict(), "steps": 6, "actual_s": 0.72, "predicted_s": 0.6}), plan=CUDA)
    full = epoch_rows((b,))
    assert full[1][-1] == "↳ cpu×2" and full[2][-1] == "↳ cuda:0" and full[2][6] == "+20%"
    compact = epoch_rows((b,), compact=True)
    assert [r[1] for r in compact[1:3]] == ["cpu×2", "cuda:0"] and len(compact[0]) == 6
    assert str(full[-1][0]) == "run"
