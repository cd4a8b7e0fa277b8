"""Who chose the plan the run trains on, as the Run panel pins it on a line of its own.

The trace says it once, when it happens, and scrolls on; this line keeps saying it: the agent's
first decision with its confidence, a move by the agent mid-run (a re-plan, with what set it off
and the epoch it moved in), or the user's override, which pins the plan until the user hands it
back (the core's closed loop, core/trainpilot/run/closed_loop.py).

Pure: built from the core's events, drawn as one Content, tested without a screen.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from textual.content import Content

from trainpilot import events as ev
from trainpilot.plans import Plan

from .format import short_label
from .trace import step_details

# How each source reads on the line, and its style (theme variables only).
SOURCE_STYLE = {
    "agent": "$success",
    "replan": "bold $accent",
    "released": "$success",
    "user": "bold $warning",
    "fallback": "bold $error",
}
@dataclass(frozen=True)
class Decision:
    """The plan in effect and where it came from. `source`: a BackendChosen's (agent | user |
    fallback | resume | launch | replan), or "released": the user handed the run back and the
    agent kept the plan so far."""

    plan: Plan
    source: str
    confidence: float | None = None
    trigger: str | None = None  # a re-plan's cause: load | pace | verify | release
    at_epoch: int | None = None  # the epoch the plan changed in (None: the run's first plan)

    @classmethod
    def of(cls, event: ev.BackendChosen, at_epoch: int | None) -> Decision:
        return cls(event.plan, event.source, event.confidence, event.trigger, at_epoch)

    def handed_back(self) -> Decision:
        return replace(self, source="released", confidence=None, trigger=None)


def is_hand_back(event: ev.Event) -> bool:
    """The core's "you handed the run back" step (`data["adapt"] == "released"`; a move that
    follows comes as a BackendChosen, source replan)."""
    return isinstance(event, ev.AgentStepped) and event.phase == "act" and event.data.get("adapt") == "released"


def adaptation_off(event: ev.Event) -> bool:
    """The core said the agent will not move this run (--adapt off, a distributed run, an energy
    objective): handing the run back would do nothing."""
    return isinstance(event, ev.AgentStepped) and step_details(event).get("adapt") == "off"


def _who(d: Decision, release_key: str | None, compact: bool) -> list[tuple[str, str] | str]:
    style = SOURCE_STYLE.get(d.source, "")
    if d.source == "agent":
        said = "conf." if compact else "confidence"
        confidence = [f" · {said} {d.confidence:.2f}"] if d.confidence is not None else []
        return [("agent", style), *confidence]
    if d.source == "replan":
        trigger = f" ({d.trigger})" if d.trigger else ""
        moved = [(" at" if compact else " · moved at") + f" epoch {d.at_epoch}"] if d.at_epoch is not None else []
        return [(f"replan{trigger}", style), *moved]
    if d.source == "released":
        return [("agent", style), " (handed back)"]
    if d.source == "user":
        how = "override" if d.at_epoch is not None else "your choice"
        if not release_key:
            return [("yours", style), f" ({how})"]
        hint = f"{release_key} hands it back"
        return [("yours", style), f" ({hint})" if compact else f" ({how}: {hint})"]
    if d.source == "resume":
        return [("resumed", style)]
    return [(d.source, style)]


def plan_line(decision: Decision | None, release_key: str | None = None, width: int | None = None) -> Content:
    """`plan cpu×2 · agent · confidence 0.95`; `release_key`: the key that hands a pinned run
    back, None where that would do nothing (adaptation off). Wider than `width` cells, the compact
    form: `plan cpu×2 · replan (load) at epoch 16`, `plan split 1+1 · cl · agent · conf. 0.67`
    (an 80-column terminal's Run panel)."""
    if decision is None:
        return Content("")
    line = _line(decision, release_key, compact=False)
    for tighter in ("compact", "minimal"):  # the plan and who chose it always; the rest as it fits
        if width is None or line.cell_length <= width:
            break
        line = _line(decision, release_key, compact=True, minimal=tighter == "minimal")
    return line


def _line(decision: Decision, release_key: str | None, compact: bool, minimal: bool = False) -> Content:
    label = short_label(decision.plan)
    parts: list[tuple[str, str] | str] = [("plan ", "$text-muted"), (label, "bold"), " · "]
    who = _who(decision, release_key, compact)
    parts += who[:1] if minimal else who  # minimal: who alone (`replan (verify)`, `yours`)
    return Content.assemble(*parts)
