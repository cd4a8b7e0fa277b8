"""Run a monitoring tool in the background and keep its latest parsed sample.

The UI samples at 2+ Hz and must never wait on a tool that prints once a second (or hangs), so the
tool runs as a child process streaming to a reader thread; `latest()` only reads a field.
"""

from __future__ import annotations

import os
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from trainpilot.machine.samplers.power_formats import Decoder, PowerSnapshot


@dataclass(frozen=True)
class StreamState:
    snapshot: PowerSnapshot | None
    age_s: float | None  # seconds since the snapshot arrived
    problem: str  # "" while healthy; otherwise why there is no fresh value


class ToolStream:
    def __init__(self, name: str, argv: list[str], decoder: Callable[[], Decoder], *, stale_after_s: float = 5.0):
        self.name = name
        self.argv = list(argv)
        self._decoder = decoder()
        self.stale_after_s = stale_after_s
        self._lock = threading.Lock()
        self._latest: PowerSnapshot | None = None
        self._latest_at = 0.0
        self._samples = 0
        self._process: subprocess.Popen[bytes] | None = None
        self._thread: threading.Thread | None = None
        self._error = ""

    @property
    def samples(self) -> int:
        return self._samples

    def start(self) -> None:
        if self._process is not None:
            return
        try:
            self._process = subprocess.Popen(
                self.argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, bufsize=0
            )
        except OSError as exc:
            self._error = f"{self.name} could not start: {exc.strerror or exc}"
            return
        self._thread = threading.Thread(target=self._read, name=f"trainpilot-{self.name}", daemon=True)
        self._thread.start()

    def _read(self) -> None:
        assert self._process is not None and self._process.stdout is not None
        fd = self._process.stdout.fileno()
        while True:
            chunk = os.read(fd, 65536)
            snapshots = self._decoder.feed(chunk) if chunk else self._decoder.flush()
            if snapshots:
                with self._lock:
                    self._latest, self._latest_at = snapshots[-1], time.monotonic()
                    self._samples += len(snapshots)
            if not chunk:
                break
        code = self._process.wait()
        self._error = f"{self.name} exited (code {code})"

    def latest(self) -> StreamState:
        with self._lock:
            snapshot, at = self._latest, self._latest_at
        if self._error:  # could not start, or exited: an old value would pass for a live one
            return StreamState(None, None, self._error)
        if snapshot is None:
            return StreamState(None, None, f"waiting for the first sample from {self.name}")
        age = time.monotonic() - at
        if age > self.stale_after_s:
            return StreamState(None, age, f"no sample from {self.name} for {age:.0f} s")
        return StreamState(snapshot, age, "")

    def close(self, timeout_s: float = 2.0) -> None:
        """Stop the child this stream started (only that process, by its handle)."""
        process = self._process
        if process is None or process.poll() is not None:
            return
        process.terminate()
        try:
            process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout_s)
        if self._thread is not None:
            self._thread.join(timeout_s)
