"""What the agent has said so far about each plan and backend, gathered from the event stream.

The backend chooser and the Hardware panel read this rather than reaching into the session from
the UI thread: events are the one source of truth, and this is just their running summary.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from trainpilot import events as ev
from trainpilot.backends import BACKEND_NAMES
from trainpilot.plans import Plan

from .trace import step_details


@dataclass(frozen=True)
class PlanOption:
    plan: Plan
    predicted_s: float | None  # whole run, as the agent predicted it; None: no estimate
    excluded_reason: str | None = None
    low_s: float | None = None  # the prediction's 80 % interval (the core's predict/interval.py)
    high_s: float | None = None

    @property
    def available(self) -> bool:
        return self.excluded_reason is None


@dataclass(frozen=True)
class BackendState:
    name: str
    state: str  # active | idle | n/a | unknown
    detail: str = ""  # the active plan's label, or the reason it is unavailable


@dataclass
class PlanBook:
    availability: dict[str, str] = field(default_factory=dict)  # name -> "available" | "n/a: reason"
    options: dict[Plan, PlanOption] = field(default_factory=dict)
    current: Plan | None = None

    def update(self, event: ev.Event) -> None:
        if isinstance(event, ev.HardwareObserved):
            backends = event.hardware.get("backends", {})
            self.availability = {str(k): str(v) for k, v in backends.items()}
        elif isinstance(event, ev.AgentStepped) and event.phase == "think":
            details = step_details(event)
            plan_data = details.get("plan")
            if isinstance(plan_data, dict) and "policy" not in details and "backend" in plan_data:
                plan = Plan.from_dict(plan_data)
                predicted = details.get("predicted_s")
                excluded = details.get("excluded")
                low, high = details.get("predicted_low_s"), details.get("predicted_high_s")
                self.options[plan] = PlanOption(plan, float(predicted) if predicted is not None else None, str(excluded) if excluded else None,
                                                float(low) if low is not None else None, float(high) if high is not None else None)
        elif isinstance(event, ev.BackendChosen):
            self.current = event.plan

    def plan_options(self) -> list[PlanOption]:
        """Every plan the agent considered, in the agent's order; a backend it never mentioned
        still appears (overriding to it is then the core's call)."""
        out = list(self.options.values())
        seen = {o.plan.backend for o in out}
        for name in BACKEND_NAMES:
            if name not in seen:
                reason = self.unavailable_reason(name)
                out.append(PlanOption(Plan(name), None, reason))
        return out

    def unavailable_reason(self, name: str) -> str | None:
        display = self.availability.get(name)
        if display is None or display == "available":
            return None
        return display.removeprefix("n/a: ") or "unavailable"

    def backend_states(self) -> tuple[BackendState, ...]:
        names = list(self.availability) or list(BACKEND_NAMES)
        states = []
        for name in names:
            display = self.availability.get(name)
            if self.current is not None and self.current.backend == name:
                states.append(BackendState(name, "active", _settings(self.current)))
            elif display is None:
                states.append(BackendState(name, "unknown", "not observed yet"))
            elif display == "available":
                states.append(BackendState(name, "idle"))
            else:
                states.append(BackendState(name, "n/a", display.removeprefix("n/a: ")))
        return tuple(states)


def _settings(plan: Plan) -> str:
    """A plan's label without its backend name: 'cpu (2 threads)' -> '2 threads'."""
    label = plan.label
    prefix = f"{plan.backend} ("
    return label[len(prefix) : -1] if label.startswith(prefix) else ""
