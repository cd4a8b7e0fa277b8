"""What a compression job reports while it runs: frozen dataclasses, consumed by the CLI (lines on
stderr) and the TUI (a thread worker posts each as a Textual message)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Union

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
class CompressionFinished:
    report: Any  # job.CompressionReport


CompressionEvent = Union[StageStarted, DenseTrained, EpisodeEvaluated, CompressionFinished]
