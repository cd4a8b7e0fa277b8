"""Ctrl-C and SIGTERM during a run: finish the step, checkpoint, then exit with the signal's code."""
from __future__ import annotations

import signal
import threading
from typing import Any

from .common import EXIT_SIGINT, EXIT_SIGTERM


class SignalStop:
    """First Ctrl-C / SIGTERM: finish the step, checkpoint, exit 130/143. Second: exit at once."""

    def __init__(self, session: Any):
        self.session = session
        self.code: int | None = None
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> "SignalStop":
        for signum in (signal.SIGINT, signal.SIGTERM):
            self._previous[signum] = signal.signal(signum, self._handle)
        return self

    def __exit__(self, *exc: Any) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)

    def _handle(self, signum: int, _frame: Any) -> None:
        code = EXIT_SIGINT if signum == signal.SIGINT else EXIT_SIGTERM
        if self.code is not None:
            raise SystemExit(code)
        self.code = code
        name = "SIGINT" if signum == signal.SIGINT else "SIGTERM"
        # Not from inside the handler: the session's queue lock may be held by the interrupted frame.
        threading.Thread(target=self.session.request_stop, args=(name,), daemon=True).start()
