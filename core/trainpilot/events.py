"""The typed events a training session emits. The TUI and the headless CLI consume the same stream.

Events are frozen dataclasses with plain-data fields so they can be turned into JSON Lines
(`event_to_dict`) and into Textual messages without the core knowing about either.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, fields, is_dataclass
from typing import Any

from trainpilot.plans import Plan


@dataclass(frozen=True)
class Event:
    run_id: str
    at: float = field(default_factory=time.time, kw_only=True)

    @property
    def kind(self) -> str:
        return type(self).__name__


@dataclass(frozen=True)
class SessionStarted(Event):
    model: str
    dataset: str
    epochs: int
    batch_size: int
    train_samples: int
    val_samples: int
    resumed_from_epoch: int = 0
    metric: str | None = "accuracy"  # what `accuracy`/`val_accuracy` of the epochs hold (None: no metric, see val_loss)


@dataclass(frozen=True)
class HardwareObserved(Event):
    """The agent's OBSERVE step: the workload profile and the live hardware state it decided on."""

    workload: dict[str, Any]
    hardware: dict[str, Any]
    text: str


@dataclass(frozen=True)
class AgentStepped(Event):
    """One line of the agent's reasoning: phase is observe | think | act."""

    phase: str
    text: str
    confidence: float | None = None
    data: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class BackendChosen(Event):
    """A plan takes effect. source: agent | user | fallback | resume | launch | replan (the agent
    moved the run mid-way: run/closed_loop.py; `trigger` says why: load | pace | verify | release)."""

    plan: Plan
    confidence: float | None
    source: str
    reason: str
    predicted_s: float | None = None  # predicted time for the remaining run on this plan
    switch_cost_s: float | None = None  # predicted cost of migrating (user overrides)
    predicted_low_s: float | None = None  # the 80 % interval of predicted_s (predict/interval.py)
    predicted_high_s: float | None = None
    trigger: str | None = None  # a replan's cause (load | pace | verify | release); None otherwise


@dataclass(frozen=True)
class OverrideRefused(Event):
    requested: str
    reason: str


@dataclass(frozen=True)
class StepProgressed(Event):
    """High-rate: one optimizer step done. Consumers may drop stale ones."""

    epoch: int
    step: int
    steps_per_epoch: int
    loss: float
    elapsed_s: float
    eta_s: float | None
    eta_low_s: float | None = None  # the 80 % interval of eta_s (predict/interval.py)
    eta_high_s: float | None = None


@dataclass(frozen=True)
class EpochTimed(Event):
    epoch: int
    loss: float
    accuracy: float | None  # the job's metric on the epoch's training batches (None: the job has none)
    val_accuracy: float | None
    predicted_s: float | None
    actual_s: float
    plan: Plan
    segments: tuple[dict[str, Any], ...] = ()  # per-plan pieces when the plan changed mid-epoch
    energy_j: float | None = None  # the epoch's training steps (energy/meter.py)
    energy_source: str | None = None  # "measured: RAPL package", "est.: ..."
    predicted_low_s: float | None = None  # the 80 % interval of predicted_s (predict/interval.py)
    predicted_high_s: float | None = None
    val_loss: float | None = None  # the loss on the held-out split (what a job without a metric shows)


@dataclass(frozen=True)
class SessionPaused(Event):
    epoch: int
    step: int


@dataclass(frozen=True)
class SessionResumed(Event):
    epoch: int
    step: int


@dataclass(frozen=True)
class CheckpointSaved(Event):
    path: str
    epoch: int
    step: int
    reason: str  # epoch | interrupt | user | migration


@dataclass(frozen=True)
class RunFinished(Event):
    """Terminal event. status: success | failed | interrupted. result follows the --json schema."""

    status: str
    message: str
    result: dict[str, Any]


def _plain(value: Any) -> Any:
    if is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in fields(value)}
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def event_to_dict(event: Event) -> dict[str, Any]:
    data = _plain(event)
    data["kind"] = event.kind
    return data


__all__ = [
    "Event",
    "SessionStarted",
    "HardwareObserved",
    "AgentStepped",
    "BackendChosen",
    "OverrideRefused",
    "StepProgressed",
    "EpochTimed",
    "SessionPaused",
    "SessionResumed",
    "CheckpointSaved",
    "RunFinished",
    "event_to_dict",
]
