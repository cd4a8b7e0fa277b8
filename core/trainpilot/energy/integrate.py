"""Energy from a power reading: watts sampled at a steady rate, integrated over time.

For the sources that report power, not energy: NVML on GPUs older than Volta, and Apple's
powermetrics. Each poll adds the mean of this and the previous reading times the time between
them (the trapezoid rule); a poll that gets no reading carries the last one forward.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable


class IntegratedPower:
    """An energy source (see meter.py) built on `read_w() -> watts or None`."""

    def __init__(
        self,
        read_w: Callable[[], float | None],
        source: str,
        *,
        estimated: bool,
        poll_interval_s: float = 0.2,
        clock: Callable[[], float] = time.monotonic,
    ):
        self._read_w = read_w
        self.source = source
        self.estimated = estimated
        self.poll_interval_s = poll_interval_s
        self._clock = clock
        self._lock = threading.Lock()
        self._last_t = clock()
        self._last_w = read_w()
        self._total_j = 0.0

    def read_j(self) -> float:
        with self._lock:
            now = self._clock()
            watts = self._read_w()
            if watts is None:
                watts = self._last_w
            if watts is not None:
                previous = self._last_w if self._last_w is not None else watts
                self._total_j += 0.5 * (previous + watts) * (now - self._last_t)
            self._last_t, self._last_w = now, watts
            return self._total_j

    def close(self) -> None:
        pass
