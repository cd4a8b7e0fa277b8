"""Ctrl-C and SIGTERM during a run: finish the step, checkpoint, then exit with the signal's code."""
from __future__ import annotations

import signal
from typing import Any, Optional

from trainpilot.run.signal_stop import SignalStop as SessionSignalStop

from .common import EXIT_SIGINT, EXIT_SIGTERM

EXIT_CODES = {signal.SIGINT: EXIT_SIGINT, signal.SIGTERM: EXIT_SIGTERM}


def _exit_now(signum: int) -> None:
    raise SystemExit(EXIT_CODES[signum])


class SignalStop(SessionSignalStop):
    """First Ctrl-C / SIGTERM: finish the step, checkpoint, exit 130/143. Second: exit at once."""

    def __init__(self, session: Any):
        super().__init__(session, {signal.SIGINT: "SIGINT", signal.SIGTERM: "SIGTERM"}, again=_exit_now)

    @property
    def code(self) -> Optional[int]:
        return EXIT_CODES[self.received] if self.received is not None else None
