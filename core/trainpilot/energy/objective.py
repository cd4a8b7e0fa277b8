"""Choosing a plan by the objective: time (seconds), energy (joules) or edp (energy x delay, J*s).

The cost model decides by time; for energy and edp the agent re-picks among the same predictions
by their predicted joules (plan_power.annotate puts them in each prediction's detail). EDP weighs
a slower plan's extra time twice (J x s = W x s^2), so it takes a lower-power plan only when the
time it costs is small. Confidence comes from the margin of the objective's score, as for time.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from trainpilot.energy.reading import EST, joules_text

if TYPE_CHECKING:
    from trainpilot.plans import Decision, PlanPrediction

OBJECTIVES = ("time", "energy", "edp")
UNITS = {"time": "s", "energy": "J", "edp": "J*s"}


def check_objective(name: str) -> str:
    """The objective's name, or ValueError with a line a CLI can print."""
    if name not in OBJECTIVES:
        raise ValueError(f"--objective must be one of {', '.join(OBJECTIVES)}, got '{name}'")
    return name


def score(prediction: PlanPrediction, objective: str) -> float | None:
    """Smaller is better: seconds, joules, or joules x seconds. None when not predicted."""
    seconds = prediction.predicted_s
    if prediction.excluded or seconds is None:
        return None
    if objective == "time":
        return seconds
    joules = prediction.detail.get("energy_j")
    if joules is None:
        return None
    return float(joules) if objective == "energy" else float(joules) * seconds


def figures_text(prediction: PlanPrediction) -> str:
    """'3.1 s, 41.2 J est.': both figures of one plan, as the trace shows them."""
    from trainpilot.units import predicted

    text = predicted(prediction.predicted_s, prediction.detail.get("interval"))
    joules = prediction.detail.get("energy_j")
    if joules is not None:
        text += f", {joules_text(float(joules))}" + (
            f" {EST}" if prediction.detail.get("energy_estimated", True) else ""
        )
    return text


def rank(predictions: Sequence[PlanPrediction], objective: str) -> list[PlanPrediction]:
    scored = [p for p in predictions if score(p, objective) is not None]
    return sorted(scored, key=lambda p: (score(p, objective), p.predicted_s))


def choose(predictions: Sequence[PlanPrediction], objective: str, decision: Decision) -> Decision:
    """The decision for `objective`. For time, or a rule-cascade decision (no calibrated times to
    weigh), the given decision stands, with a line saying so for the other objectives."""
    from dataclasses import replace

    from trainpilot.predict.confidence import confidence_from_margin

    check_objective(objective)
    if objective == "time":
        return decision
    if decision.policy != "cost-model":
        line = f"objective {objective}: the rule cascade decides until this machine is calibrated"
        return replace(decision, reasoning=(*decision.reasoning, line))
    ranked = rank(predictions, objective)
    if not ranked:
        line = f"objective {objective}: no plan has a predicted energy; keeping {decision.plan.label}"
        return replace(decision, reasoning=(*decision.reasoning, line))
    best = ranked[0]
    lines: list[str] = []
    margin = None
    if len(ranked) > 1:
        runner = ranked[1]
        margin = score(runner, objective) / score(best, objective) - 1.0  # type: ignore[operator]
        lines.append(
            f"objective {objective}: {best.plan.label} ({figures_text(best)}) scores {margin:.0%} better than"
            f" {runner.plan.label} ({figures_text(runner)})"
        )
    fastest = min((p for p in predictions if score(p, "time") is not None), key=lambda p: p.predicted_s)  # type: ignore[arg-type, return-value]
    if fastest.plan != best.plan:
        lines.append(
            f"not the fastest plan, {fastest.plan.label} ({figures_text(fastest)}):"
            f" {objective} puts {best.plan.label} first"
        )
    # Energy inherits the time's error (power per plan is steadier than time); EDP squares time.
    sigma = float(best.detail.get("relative_error", 0.3)) * (2.0 if objective == "edp" else 1.0)
    confidence = confidence_from_margin(margin, sigma)
    lines.append(
        f"choose {best.plan.label} for {objective}: {figures_text(best)} predicted, confidence {confidence:.2f}"
    )
    return replace(
        decision,
        plan=best.plan,
        predicted_s=best.predicted_s,
        confidence=confidence,
        reasoning=(*decision.reasoning, *lines),
        margin=margin,
    )
