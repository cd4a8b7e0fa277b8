"""Ctrl-C (and SIGTERM, for the CLI) while a session runs in the main thread: the first signal asks
the session to stop at the next step boundary, after a checkpoint; a second one calls `again`, the
caller's way out (KeyboardInterrupt from Python, an exit code from the CLI)."""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable
from typing import Any


def _interrupt(_signum: int) -> None:
    raise KeyboardInterrupt


class SignalStop:
    """`with SignalStop(session): ...`. `reasons`: each signal handled, with the stop reason it gives
    (default Ctrl-C only). Outside the main thread, where Python delivers no signal, it does nothing."""

    def __init__(
        self,
        session: Any,
        reasons: dict[int, str] | None = None,
        again: Callable[[int], None] = _interrupt,
    ):
        self.session = session
        self.reasons = reasons or {signal.SIGINT: "Ctrl-C"}
        self.again = again
        self.received: int | None = None  # the first signal that came
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> SignalStop:
        if threading.current_thread() is threading.main_thread():
            for signum in self.reasons:
                self._previous[signum] = signal.signal(signum, self._handle)
        return self

    def __exit__(self, *exc: Any) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)
        self._previous.clear()

    def _handle(self, signum: int, _frame: Any) -> None:
        if self.received is not None:
            self.again(signum)
            return
        self.received = signum
        # Not from inside the handler: the interrupted frame may hold the steering queue's lock.
        threading.Thread(target=self.session.request_stop, args=(self.reasons[signum],), daemon=True).start()
