"""The host-side glue a Trainer integration needs twice: the agent's last decision per model, so
the callback finds what `choose` decided, and the callback class built on the host's own base
class only when it is first used (so importing the integration never imports the host)."""

from __future__ import annotations

import weakref
from typing import Any, Generic, TypeVar

T = TypeVar("T")


class Decisions(Generic[T]):
    """The last decision per model. Weak: a decision never keeps a model alive."""

    def __init__(self) -> None:
        self._by_model: weakref.WeakKeyDictionary[Any, T] = weakref.WeakKeyDictionary()

    def last(self, model: Any) -> T | None:
        try:
            return self._by_model.get(model)
        except TypeError:  # not weak-referenceable
            return None

    def remember(self, model: Any, decision: T) -> None:
        try:
            self._by_model[model] = decision
        except TypeError:  # not weak-referenceable: the callback then needs choice= or plans itself
            pass


def callback_on(hooks: type, host_base: type, module: str) -> type:
    """`TrainPilotCallback` for one host: its hooks on the host's callback base class, named as the
    public module exports it."""
    return type(
        "TrainPilotCallback",
        (hooks, host_base),
        {"__module__": module, "__qualname__": "TrainPilotCallback", "__doc__": hooks.__doc__},
    )
