"""A backstop for hangs the process group's timeout cannot see.

The group's timeout ends a rank that waits on a peer inside a collective. A rank stuck anywhere
else (a deadlock in data loading, a kernel that never returns) would never enter the next
collective and never time out itself; its peers fail, but it would linger. The watchdog thread
notices that no step boundary was reached for `limit_s` and calls `on_expire`, which reports and
ends the process (`os._exit`: the main thread is stuck, so an exception would never arrive).

A rank asked to stop (the launcher sends SIGTERM to the survivors when one rank fails) stops at its
next step boundary; `expire_within` bounds how long that may take, so a hung rank that cannot reach
one still ends instead of waiting for the launcher's 30 s SIGKILL.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable


class Watchdog:
    def __init__(self, limit_s: float, on_expire: Callable[[float], None]):
        self.limit_s = limit_s
        self._on_expire = on_expire
        self._last = time.monotonic()
        self._deadline: float | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="trainpilot-watchdog", daemon=True)

    def beat(self) -> None:
        self._last = time.monotonic()

    def expire_within(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        self._deadline = deadline if self._deadline is None else min(self._deadline, deadline)

    def __enter__(self) -> Watchdog:
        self.beat()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=1.0)

    def _watch(self) -> None:
        interval = max(0.05, min(1.0, self.limit_s / 10))
        while not self._stop.wait(interval):
            now = time.monotonic()
            idle = now - self._last
            if idle > self.limit_s or (self._deadline is not None and now > self._deadline):
                self._on_expire(idle)
                return
