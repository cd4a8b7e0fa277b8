"""What a compression job reports while it runs: frozen dataclasses, consumed by the CLI (lines on
stderr) and the TUI (a thread worker posts each as a Textual message)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Union

from trainpilot.compress.drop_interval import DropInterval
from trainpilot.compress.evaluate import Evaluation
from trainpilot.compress.layers import LayerInfo


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
class CompressionFinished:
    report: Any  # job.CompressionReport


CompressionEvent = Union[StageStarted, DenseTrained, EpisodeEvaluated, Notice, Tested, CompressionFinished]
