"""What a person reads of a decision (agent/plan_summary.py): every plan once in short form, what
the plans share said once, exclusions grouped by reason, at most three reasons."""
from __future__ import annotations

import json

import pytest

from trainpilot.agent.orchestrator import Agent
from trainpilot.agent.plan_summary import MAX_REASONS, PlanSummary, shorten, summarize
from trainpilot.compat.orchestrator import load_from_state
from trainpilot.job.models import build_model
from trainpilot.job.workload import profile_model
from trainpilot.machine.probe import HardwareInfo
from trainpilot.plans import Availability, Decision, Plan, PlanPrediction

CPU1, CPU2 = Plan("cpu", threads=1), Plan("cpu", threads=2)
ROOFLINE = "roofline: calibration only, no comparable runs yet"


def predicted(plan: Plan, seconds: float, **detail) -> PlanPrediction:
    base = {"energy_j": seconds * 5.0, "energy_estimated": True, "energy_source": "est.: 5 W per busy core (generic figure) x 1 thread(s)",
            "interval": {"low_s": seconds * 0.8, "high_s": seconds * 1.3}, "relative_error": 0.2}
    return PlanPrediction(plan, seconds, source=detail.pop("source", "roofline"), detail={**base, **detail})


def excluded(plan: Plan, why: str) -> PlanPrediction:
    return PlanPrediction(plan, None, excluded_reason=why)


COMPILE = "torch.compile not measured here yet (`trainpilot headless calibrate --compile`)"
PREDICTIONS = [
    predicted(CPU2, 3.0),
    predicted(CPU1.with_settings("channels_last"), 2.0, notes="channels_last probed at 1.50x fp32 NCHW's speed"),
    predicted(CPU1, 2.5, source="history", history_runs={"same_workload": 3, "similar": 1}),
    excluded(Plan("cpu", threads=1, mode="compiled"), COMPILE),
    excluded(Plan("cpu", threads=2, mode="compiled"), COMPILE),
    excluded(Plan("ane"), "not Apple Silicon"),
]
DECISION = Decision(CPU1.with_settings("channels_last"), 2.0, 0.8,
                    ("margin: cpu (1 thread, channels_last) is predicted 25% faster than cpu (1 thread)",
                     "confidence 0.80: a 25% margin against ±20% measured error (3 comparable runs)",
                     "roofline spoke: choose cpu (1 thread, channels_last), 2.00s predicted"), 0.25, "cost-model")


def test_rows_sorted_by_the_objective_with_the_choice_marked() -> None:
    summary = summarize(PREDICTIONS, DECISION)
    assert [r.short for r in summary.rows] == ["cpu×1 · cl", "cpu×1", "cpu×2"]
    assert [r.chosen for r in summary.rows] == [True, False, False]
    assert summary.rows[0].note == "channels_last probed at 1.50x fp32 NCHW's speed"
    assert summary.rows[1].basis == "history: 3 run(s) + 1 similar"  # the plans differ in it: said per row
    by_energy = summarize(PREDICTIONS, DECISION, "energy")
    assert [r.short for r in by_energy.rows] == ["cpu×1 · cl", "cpu×1", "cpu×2"]


def test_what_every_plan_shares_is_said_once() -> None:
    same = [predicted(CPU2, 3.0), predicted(CPU1, 2.0)]
    summary = summarize(same, Decision(CPU1, 2.0, 0.7, (), 0.5, "cost-model"), context=["layouts weighed: contiguous"])
    assert summary.shared[0] == "layouts weighed: contiguous"
    assert ROOFLINE in summary.shared and all(ROOFLINE not in (r.note + r.basis) for r in summary.rows)
    energy = [line for line in summary.shared if line.startswith("energy")]
    assert energy == ["energy (est.): 5 W per busy core (generic figure)"]  # once, without each plan's thread count


def test_exclusions_are_grouped_by_reason_with_what_lifts_them() -> None:
    summary = summarize(PREDICTIONS, DECISION)
    texts = [g.text for g in summary.excluded]
    assert texts == ["2 compiled plans: torch.compile not measured here yet — trainpilot headless calibrate --compile",
                     "ane: not Apple Silicon"]
    assert summary.excluded[0].plans == ("cpu×1 · compiled", "cpu×2 · compiled")


def test_at_most_three_short_reasons_in_short_labels() -> None:
    summary = summarize(PREDICTIONS, DECISION, settings_reasons=["channels_last: predicted 1.25x faster for this model at 1 thread(s)", "one too many"])
    assert len(summary.reasons) == MAX_REASONS
    assert summary.reasons[0] == "predicted 25% faster than the next plan, cpu×1 (2.5 s)"
    assert summary.reasons[1].startswith("confidence 0.80")
    assert summary.decision == "cpu×1 · cl — 2.0 s (1.6–2.6), 10.0 J est., confidence 0.80"
    tie = summarize([predicted(CPU1, 2.0), predicted(CPU2, 2.01)], Decision(CPU1, 2.0, 0.5, (), 0.005, "cost-model"))
    assert tie.reasons[0] == "a near tie with cpu×2 (2.0 s): within 1% by prediction"


def test_long_labels_in_a_line_become_short_ones() -> None:
    split = Plan.split((CPU1, CPU1)).with_settings("channels_last")
    text = "split: cpu (1 thread) + cpu (1 thread) (channels_last) is predicted 2% faster than cpu (1 thread)"
    assert shorten(text, [CPU1, split]) == "split 1+1 · cl is predicted 2% faster than cpu×1"


def two_core_machine() -> HardwareInfo:
    avail = {"cpu": Availability(True), "ane": Availability(False, "not Apple Silicon"), "mps": Availability(False, "not macOS"),
             "cuda": Availability(False, "no CUDA device found")}
    return HardwareInfo("test", "Linux", "x86_64", "test cpu", 2, 2, 8 << 30, avail)


@pytest.mark.parametrize("calibrated", [False, True])
def test_the_agent_puts_its_summary_in_the_decision_step(calibrated: bool, request: pytest.FixtureRequest) -> None:
    """On a real model: the decision step carries the summary (JSON, as events travel), every plan
    of the trace is a row or in an exclusion group, and the trace's reasons and per-plan lines are
    marked as what the summary says in short."""
    from trainpilot.predict.first_estimate import FirstEstimate

    predictor = request.getfixturevalue("calibrated_model") if calibrated else FirstEstimate(2, throughput=lambda t: 5e9 * (1 + 0.8 * (t - 1)))
    profile = profile_model(build_model("small_cnn", (1, 28, 28), 10), (1, 28, 28), 10, 2000, name="small_cnn", batch_size=64, epochs=2)
    agent = Agent(predictor=predictor, hardware=two_core_machine())
    result = agent.plan(profile, load_from_state({"cpu_utilization": 0.0}, 2))
    decision_step = result.steps[-1]
    summary = PlanSummary.from_dict(json.loads(json.dumps(decision_step.data["summary"])))
    assert summary.chosen == result.decision.plan.short_label and sum(r.chosen for r in summary.rows) == 1
    per_plan = [s for s in result.steps if s.data.get("part") == "plan"]
    grouped = sum(len(g.plans) for g in summary.excluded)
    assert len(summary.rows) + grouped == len(per_plan) == len(result.predictions)
    assert 1 <= len(summary.reasons) <= MAX_REASONS
    assert all(s.data.get("part") == "reason" for s in result.steps if s.confidence is not None and s is not decision_step)
