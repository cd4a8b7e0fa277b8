"""What the Agent panel says for each core event: the observe -> think -> act trace as plain entries.

Pure functions, no widgets, so the wording is tested without a screen. `kind` picks a component
class of the Agent panel (its .tcss decides how an override or a refusal stands out, through theme
colours only).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from trainpilot import events as ev
from trainpilot.energy import Energy

from . import format as fmt


# Every kind an entry can have; the Agent panel styles each through a component class.
KINDS = ("observe", "think", "excluded", "decision", "act", "user", "refused", "fallback", "learn", "pause", "checkpoint", "done", "failed")


@dataclass(frozen=True)
class TraceEntry:
    phase: str  # the label column: observe | think | act | learn | run | user
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


def _chosen(event: ev.BackendChosen) -> TraceEntry:
    label = event.plan.label
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
