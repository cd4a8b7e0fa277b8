"""What the Agent panel says for each core event: the observe -> think -> act trace as plain entries.

Pure functions, no widgets, so the wording is tested without a screen. `kind` picks a component
class of the Agent panel (its .tcss decides how an override or a refusal stands out, through theme
colours only).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from trainpilot import events as ev
from trainpilot.agent.plan_summary import PlanSummary
from trainpilot.energy import Energy
from trainpilot.energy.reading import joules_text

from . import format as fmt


# Every kind an entry can have; the Agent panel styles each through a component class.
KINDS = ("observe", "think", "excluded", "decision", "act", "user", "refused", "fallback", "learn", "pause", "checkpoint", "done", "failed")


@dataclass(frozen=True)
class TraceEntry:
    phase: str  # the label column: observe | think | act | learn | run | user | plan | n/a
    text: str
    kind: str  # observe | think | excluded | decision | act | user | refused | fallback | learn | pause | checkpoint | done | failed


def step_details(step: ev.AgentStepped) -> dict[str, Any]:
    """The structured part of a reasoning step. The agent passes keyword data either flat or under
    one `data` key; accept both so the trace does not depend on that detail."""
    data = step.data
    inner = data.get("data") if isinstance(data, dict) else None
    return inner if isinstance(inner, dict) else dict(data or {})


def _confidence(value: float | None) -> str:
    return "" if value is None else f", confidence {value:.2f}"


def entries_for(event: ev.Event) -> list[TraceEntry]:
    if isinstance(event, ev.SessionStarted):
        resumed = f", resuming at epoch {event.resumed_from_epoch + 1}" if event.resumed_from_epoch else ""
        text = (
            f"run {event.run_id}: {event.model} on {event.dataset}, {event.train_samples} train / "
            f"{event.val_samples} validation samples, {event.epochs} epoch(s) of batch {event.batch_size}{resumed}"
        )
        return [TraceEntry("run", text, "observe")]
    if isinstance(event, ev.HardwareObserved):
        return []  # the agent's own observe step follows with the same text
    if isinstance(event, ev.AgentStepped):
        details = step_details(event)
        if "summary" in details:
            return summary_entries(PlanSummary.from_dict(details["summary"]))
        if details.get("part") in ("plan", "reason"):
            return []  # the decision's summary says it in short
        if details.get("excluded"):
            kind = "excluded"
        elif "policy" in details or event.text.startswith("decision:"):
            kind = "decision"
        else:
            kind = event.phase if event.phase in ("observe", "think", "act") else "think"
        return [TraceEntry(event.phase, event.text, kind)]
    if isinstance(event, ev.BackendChosen):
        return [_chosen(event)]
    if isinstance(event, ev.OverrideRefused):
        return [TraceEntry("act", f"override to {event.requested} refused: {event.reason}", "refused")]
    if isinstance(event, ev.EpochTimed):
        parts = f" in {len(event.segments)} segments" if len(event.segments) > 1 else ""
        text = (
            f"epoch {event.epoch}: predicted {fmt.seconds(event.predicted_s)}, actual {fmt.seconds(event.actual_s)}"
            f" ({fmt.error(event.predicted_s, event.actual_s)}){parts}; loss {event.loss:.3f}"
        )
        if event.energy_j is not None:
            text += f"; {Energy.recorded(event.energy_j, event.energy_source).text}"
        return [TraceEntry("learn", text, "learn")]
    if isinstance(event, ev.SessionPaused):
        return [TraceEntry("user", f"paused at epoch {event.epoch}, step {event.step}", "pause")]
    if isinstance(event, ev.SessionResumed):
        return [TraceEntry("user", f"resumed at epoch {event.epoch}, step {event.step}", "pause")]
    if isinstance(event, ev.CheckpointSaved):
        if event.reason == "epoch":
            return []  # routine; the Run panel shows the last one
        return [TraceEntry("run", f"checkpoint saved at epoch {event.epoch}, step {event.step} ({event.reason}): {event.path}", "checkpoint")]
    if isinstance(event, ev.RunFinished):
        kind = {"success": "done", "interrupted": "checkpoint"}.get(event.status, "failed")
        return [TraceEntry("run", f"{event.status}: {event.message}", kind)]
    return [TraceEntry("run", f"{event.kind}", "think")]


def summary_entries(summary: PlanSummary) -> list[TraceEntry]:
    """The decision, its reasons, then every plan in short form (sorted by the objective, the chosen
    one marked) and the plans that cannot run, one entry per reason."""
    out = [TraceEntry("think", f"decision: {summary.decision}", "decision")]
    out += [TraceEntry("think", f"· {reason}", "think") for reason in summary.reasons]
    for row in summary.rows:
        energy = "" if row.energy_j is None else f" · {joules_text(row.energy_j)}" + (" est." if row.energy_estimated else "")
        mark = "▸ " if row.chosen else "  "
        out.append(TraceEntry("plan", f"{mark}{row.short}  {fmt.seconds_range(row.predicted_s, row.low_s, row.high_s)}{energy}", "decision" if row.chosen else "think"))
    out += [TraceEntry("n/a", group.text, "excluded") for group in summary.excluded]
    return out


def _chosen(event: ev.BackendChosen) -> TraceEntry:
    label = event.plan.short_label
    remaining = f"; predicted {fmt.seconds(event.predicted_s)} for the rest of the run" if event.predicted_s is not None else ""
    if event.source == "user":
        cost = fmt.seconds(event.switch_cost_s) if event.switch_cost_s is not None else "n/a"
        return TraceEntry("act", f"user override -> {label}; predicted switch cost {cost}{remaining}", "user")
    if event.source == "fallback":
        return TraceEntry("act", f"fallback to {label}: {event.reason}", "fallback")
    if event.source == "replan":  # the agent moved the run mid-way (closed loop); its reasons come just before
        why = f": {event.trigger}" if event.trigger else ""
        return TraceEntry("act", f"train on {label} (re-planned{why}){remaining}", "decision")
    if event.source == "resume":
        return TraceEntry("act", f"train on {label} ({event.reason}){remaining}", "act")
    return TraceEntry("act", f"train on {label} (agent{_confidence(event.confidence)}){remaining}", "act")
