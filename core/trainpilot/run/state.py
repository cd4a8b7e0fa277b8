"""The mutable state of a running session, kept in small records so the result and a checkpoint
can be built from it at any step boundary."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from typing import Any

from trainpilot.plans import Plan


@dataclass
class Segment:
    """The steps of one epoch trained on one plan (an override mid-epoch starts a new segment)."""

    plan: Plan
    steps: int = 0
    seconds: float = 0.0
    predicted_s: float | None = None


@dataclass
class Totals:
    """Running sums of the epoch in progress (checkpointed, so a resumed epoch reports whole-epoch figures)."""

    loss_sum: float = 0.0
    correct: float = 0.0
    seen: float = 0.0

    def copy(self) -> Totals:
        return replace(self)

    def to_dict(self) -> dict[str, float]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Any) -> Totals:
        try:
            return cls(float(data["loss_sum"]), float(data["correct"]), float(data["seen"]))
        except (TypeError, KeyError, ValueError):
            return cls()


@dataclass
class Snapshot:
    """The last state known to be good (CPU copies) and where it was: a device fault restarts here."""

    epoch: int
    step: int
    totals: Totals
    state: dict[str, Any]


@dataclass
class Runtime:
    """What the run has done so far: its epochs, plan changes, decision and checkpoint."""

    epoch_records: list[dict[str, Any]] = field(default_factory=list)
    plan_changes: list[dict[str, Any]] = field(default_factory=list)
    confidence: float | None = None
    policy: str = "rules"
    predicted_total_s: float | None = None
    train_seconds: float = 0.0
    fallback_reason: str | None = None
    val_accuracy: float | None = None
    checkpoint: str | None = None
