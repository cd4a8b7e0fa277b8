"""Messages of the compression view: each event of a compression job (trainpilot.compress.events)
becomes one past-tense message, posted by the job's thread worker; handlers on the screen only
update widgets."""
from __future__ import annotations

from typing import Any

from textual.message import Message

from trainpilot.compress import events as ev


class CompressionMessage(Message):
    def __init__(self, event: Any) -> None:
        super().__init__()
        self.event = event


class CompressionStageStarted(CompressionMessage):
    event: ev.StageStarted


class DenseModelTrained(CompressionMessage):
    event: ev.DenseTrained


class CompressionEpisodeEvaluated(CompressionMessage):
    event: ev.EpisodeEvaluated


class CompressionNoticed(CompressionMessage):
    event: ev.Notice


class SpeedAimMeasured(CompressionMessage):
    """How far past the target the search aims: this machine's timing noise."""

    event: ev.AimMeasured


class DeploymentSpeedMeasured(CompressionMessage):
    """The chosen configuration's speed-up with its interval."""

    event: ev.SpeedMeasured


class DeploymentTested(CompressionMessage):
    event: ev.Tested


class CompressionFinished(CompressionMessage):
    event: ev.CompressionFinished


class CompressionFailed(Message):
    """The job refused its input (one line) or failed."""

    def __init__(self, problem: str) -> None:
        super().__init__()
        self.problem = problem


_BY_EVENT = {
    ev.StageStarted: CompressionStageStarted,
    ev.DenseTrained: DenseModelTrained,
    ev.EpisodeEvaluated: CompressionEpisodeEvaluated,
    ev.Notice: CompressionNoticed,
    ev.AimMeasured: SpeedAimMeasured,
    ev.SpeedMeasured: DeploymentSpeedMeasured,
    ev.Tested: DeploymentTested,
    ev.CompressionFinished: CompressionFinished,
}


def message_for(event: Any) -> CompressionMessage:
    return _BY_EVENT[type(event)](event)
