"""What a compression job reports while it runs: frozen dataclasses, consumed by the CLI (lines on
stderr) and the TUI (a thread worker posts each as a Textual message)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Union

from trainpilot.compress.drop_interval import DropInterval
from trainpilot.compress.evaluate import Evaluation
from trainpilot.compress.layers import LayerInfo
from trainpilot.compress.speed_margin import SpeedAim
from trainpilot.compress.speedup_interval import SpeedupInterval


@dataclass(frozen=True)
class StageStarted:
    stage: str  # plan | train | search | deploy | baselines | export
    text: str


@dataclass(frozen=True)
class DenseTrained:
    val_accuracy: float
    test_accuracy: float
    seconds: float
    threads: int
    threads_reason: str
    layers: tuple[LayerInfo, ...]


@dataclass(frozen=True)
class EpisodeEvaluated:
    episode: int
    episodes: int
    evaluation: Evaluation
    best: Evaluation | None  # the best so far by search.best


@dataclass(frozen=True)
class Notice:
    """Something the user should know now, not only in the final report (it is in its notes too)."""

    text: str


@dataclass(frozen=True)
class Tested:
    """The configuration chosen for deployment, scored on the test split against the dense model."""

    kind: str  # "agent" | "uniform" | "l1-global" (finalists.Finalist.kind)
    accuracy: float
    drop: DropInterval


@dataclass(frozen=True)
class AimMeasured:
    """How far past the target the search aims: this machine's measured timing noise (speed_margin.py)."""

    aim: SpeedAim
    target_speedup: float

    def text(self) -> str:
        return self.aim.text(self.target_speedup)


@dataclass(frozen=True)
class SpeedMeasured:
    """The configuration chosen for deployment, timed against the dense model until the speed-up's
    interval decides against the target (or predicted, exact, for a described machine)."""

    kind: str  # as Tested.kind
    speed: SpeedupInterval
    target_speedup: float

    def text(self) -> str:
        from trainpilot.compress.deploy import speed_text

        return f"{self.kind}: {self.speed.label} speed-up {speed_text(self.speed, self.target_speedup)}"


@dataclass(frozen=True)
class CompressionFinished:
    report: Any  # job.CompressionReport


CompressionEvent = Union[
    StageStarted, DenseTrained, AimMeasured, EpisodeEvaluated, Notice, Tested, SpeedMeasured, CompressionFinished
]
