"""The estimate when nothing measures energy: watts per busy core x the CPU seconds the run used.

CPU seconds (user + system, from psutil) are the measured utilisation: a run that keeps two cores
busy for 3 s used 6 CPU-seconds, whatever its thread count says. By default this process and its
children count (a parent that launched the ranks of a distributed run meters all of them); a
process seen once keeps the CPU time it had at its last reading after it exits.

Looking for children walks all of /proc (psutil reads every process's parent), and twice an epoch
it was a measurable part of what TrainPilot adds to an epoch (benchmarks/overhead.py; measured:
docs/measurements.md#what-trainpilot-costs-on-the-cpu, docs/measurements.md#cited-in-the-code-overhead).
So children are looked for at most once a poll interval, which the meter's background thread
keeps to; a reading between looks reads the processes already known.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterable

import psutil


def _cpu_s(proc: psutil.Process) -> float | None:
    if proc.pid == os.getpid():
        # clock_gettime(CLOCK_PROCESS_CPUTIME_ID): nanoseconds, where /proc counts 10 ms ticks that
        # would read a short epoch as 0 J.
        return time.process_time()
    try:
        t = proc.cpu_times()
    except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
        return None
    return float(t.user + t.system)


class CpuTimeEstimate:
    """An energy source (see meter.py)."""

    estimated = True
    poll_interval_s = 1.0  # only to catch children before they exit

    def __init__(self, watts_per_core: float, source: str, pids: Iterable[int] | None = None):
        self.watts_per_core = float(watts_per_core)
        self.source = source if source.startswith("est.") else f"est.: {source}"
        self.source = f"{self.source} x CPU time"
        self._fixed = None if pids is None else [psutil.Process(pid) for pid in pids]
        self._lock = threading.Lock()
        self._start: dict[int, float] = {}
        self._last: dict[int, float] = {}
        self._known: list[psutil.Process] = []
        self._looked_at = float("-inf")  # time.monotonic() of the last look for children
        self._read_cpu()
        self._start = dict(self._last)

    def _processes(self) -> list[psutil.Process]:
        if self._fixed is not None:
            return self._fixed
        now = time.monotonic()
        if now - self._looked_at >= self.poll_interval_s:
            self._looked_at = now
            me = psutil.Process(os.getpid())
            try:
                self._known = [me, *me.children(recursive=True)]
            except psutil.Error:
                self._known = [me]
        return self._known

    def _read_cpu(self) -> float:
        for proc in self._processes():
            seconds = _cpu_s(proc)
            if seconds is not None:
                self._last[proc.pid] = seconds
        # A child that appeared after the start counts from 0; one that exited keeps its last value.
        return sum(v - self._start.get(pid, 0.0) for pid, v in self._last.items())

    def cpu_seconds(self) -> float:
        with self._lock:
            return self._read_cpu()

    def read_j(self) -> float:
        return self.cpu_seconds() * self.watts_per_core

    def close(self) -> None:
        pass


class WallTimeEstimate:
    """An accelerator no sensor reports: its board power figure x the time the run used it."""

    estimated = True
    poll_interval_s = 30.0

    def __init__(self, watts: float, source: str, clock: Callable[[], float] = time.monotonic):
        self.watts = float(watts)
        self.source = f"{source} x time"
        self._clock = clock
        self._t0 = clock()

    def read_j(self) -> float:
        return (self._clock() - self._t0) * self.watts

    def close(self) -> None:
        pass
