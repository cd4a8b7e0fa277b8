"""Requests from other threads (override, release, pause, resume, stop), queued and applied by the session
at the next step boundary, so the model and optimizer are never touched mid-step."""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator
from typing import Any


class Steering:
    def __init__(self) -> None:
        self._commands: queue.Queue[tuple[str, Any]] = queue.Queue()
        self._pause = threading.Event()
        self._lock = threading.Lock()
        self.stop_reason: str | None = None

    # ---------------------------------------------------------------- any thread

    def override(self, request: Any) -> None:
        self._commands.put(("override", request))

    def release(self) -> None:
        """Hand an overridden run back to the agent (run/closed_loop.py decides again)."""
        self._commands.put(("release", None))

    def pause(self) -> None:
        self._commands.put(("pause", None))

    def resume(self) -> None:
        self._commands.put(("resume", None))

    def request_stop(self, reason: str) -> None:
        """The first reason wins; a paused run wakes to stop."""
        self.stop(reason)
        self._pause.clear()
        self._commands.put(("wake", None))

    def stop(self, reason: str) -> None:
        with self._lock:
            self.stop_reason = self.stop_reason or reason

    @property
    def paused(self) -> bool:
        return self._pause.is_set()

    # ---------------------------------------------------------------- the session's thread

    def pending(self) -> Iterator[tuple[str, Any]]:
        """The requests waiting now, in order; while paused, blocks until one comes (any wakes it).
        Pause and resume are yielded only when they change the state."""
        while True:
            try:
                kind, arg = self._commands.get_nowait()
            except queue.Empty:
                if self._pause.is_set() and not self.stop_reason:
                    kind, arg = self._commands.get()
                else:
                    return
            if kind == "pause":
                if self._pause.is_set():
                    continue
                self._pause.set()
            elif kind == "resume":
                if not self._pause.is_set():
                    continue
                self._pause.clear()
            yield kind, arg
