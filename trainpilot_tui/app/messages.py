"""The Textual messages the app runs on: each core event becomes one past-tense message.

Workers (threads) only create these and post them; handlers on the screen and the app turn them
into reactive state. The core's events are frozen dataclasses, so a message can hand its `event`
to any handler without copying.

High-rate messages (`StepProgressed`, `UtilizationSampled`) say they can replace an older one of
their kind still waiting in the queue: when the screen falls behind, stale figures are dropped
rather than drawn late. A sample carries its whole short history, so dropping one loses no point of
a sparkline.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from textual.message import Message

from trainpilot import events as ev

if TYPE_CHECKING:
    from trainpilot.machine.monitor import UtilizationSample


class SessionMessage(Message):
    """A core event delivered to the screen; `event` is the core's frozen dataclass."""

    def __init__(self, event: ev.Event) -> None:
        super().__init__()
        self.event = event


class SessionStarted(SessionMessage):
    event: ev.SessionStarted


class HardwareObserved(SessionMessage):
    event: ev.HardwareObserved


class AgentStepped(SessionMessage):
    event: ev.AgentStepped


class BackendChosen(SessionMessage):
    event: ev.BackendChosen


class OverrideRefused(SessionMessage):
    event: ev.OverrideRefused


class StepProgressed(SessionMessage):
    event: ev.StepProgressed

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, StepProgressed)


class EpochTimed(SessionMessage):
    event: ev.EpochTimed


class SessionPaused(SessionMessage):
    event: ev.SessionPaused


class SessionResumed(SessionMessage):
    event: ev.SessionResumed


class CheckpointSaved(SessionMessage):
    event: ev.CheckpointSaved


class RunFinished(SessionMessage):
    event: ev.RunFinished


class EventReceived(SessionMessage):
    """An event kind this version of the app does not know yet: shown in the trace, never dropped."""


class SessionCrashed(Message):
    """The session's worker died outside the event stream (a bug): the run is over."""

    def __init__(self, error: str) -> None:
        super().__init__()
        self.error = error


class UtilizationSampled(Message):
    """The newest hardware sample and the short history ending with it (oldest first)."""

    def __init__(self, sample: "UtilizationSample", history: tuple["UtilizationSample", ...]) -> None:
        super().__init__()
        self.sample = sample
        self.history = history

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, UtilizationSampled)


_FOR_EVENT: dict[type[ev.Event], type[SessionMessage]] = {
    ev.SessionStarted: SessionStarted,
    ev.HardwareObserved: HardwareObserved,
    ev.AgentStepped: AgentStepped,
    ev.BackendChosen: BackendChosen,
    ev.OverrideRefused: OverrideRefused,
    ev.StepProgressed: StepProgressed,
    ev.EpochTimed: EpochTimed,
    ev.SessionPaused: SessionPaused,
    ev.SessionResumed: SessionResumed,
    ev.CheckpointSaved: CheckpointSaved,
    ev.RunFinished: RunFinished,
}


def message_for(event: ev.Event) -> SessionMessage:
    return _FOR_EVENT.get(type(event), EventReceived)(event)
