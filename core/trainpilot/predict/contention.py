"""Other processes on the CPU: a real busy-loop load to measure against, and a meter that says how
much CPU *other* processes used while we timed something.

Why both: the load a plan will meet changes its best thread count (on 2 cores with one kept busy,
1 thread trains about twice as fast as 2), so calibration measures every plan idle *and* next to a
real busy core. And a timing taken while something else grabbed a core is not the state we meant
to measure; the meter lets the caller notice and measure again instead of learning noise.
"""
from __future__ import annotations

import os
import subprocess
import sys
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

import psutil

if TYPE_CHECKING:
    from ..monitor import UtilizationSample

# A pure-Python spin: one process keeps one core at 100% and touches almost no memory.
_SPIN = "import time\nend = time.monotonic() + {limit}\nwhile time.monotonic() < end:\n    pass\n"


class BusyLoad:
    """Start `cores` busy-loop processes; stop them on exit. Each one ends by itself after
    `limit_s` too, so a crashed parent never leaves a core spinning."""

    def __init__(self, cores: int = 1, limit_s: float = 600.0, settle_s: float = 0.3):
        self.cores, self.limit_s, self.settle_s = cores, limit_s, settle_s
        self.processes: list[subprocess.Popen[bytes]] = []

    def __enter__(self) -> "BusyLoad":
        code = _SPIN.format(limit=float(self.limit_s))
        for _ in range(self.cores):
            self.processes.append(
                subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            )
        time.sleep(self.settle_s)  # let the scheduler place them before anything is timed
        return self

    @property
    def pids(self) -> list[int]:
        return [p.pid for p in self.processes]

    def stop(self) -> None:
        for proc in self.processes:
            if proc.poll() is None:
                proc.kill()
        for proc in self.processes:
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:  # pragma: no cover - the kernel always reaps a SIGKILL
                pass
        self.processes.clear()

    def __exit__(self, *exc: object) -> None:
        self.stop()


@dataclass
class ExternalCpu:
    """CPU used by everything except this process (and its children) over a measured block."""

    wall_s: float = 0.0
    other_cpu_s: float = 0.0

    @property
    def cores(self) -> float:
        """Average number of cores other processes kept busy."""
        return self.other_cpu_s / self.wall_s if self.wall_s > 0 else 0.0

    def as_sample(self, logical_cpus: int) -> "UtilizationSample":
        """The load a run actually met, as the sample `Predictor.record` takes: what a run is
        learnt under should be the load during it, not a glance before it started."""
        from ..monitor import UtilizationSample

        per_core = tuple(max(0.0, min(self.cores - i, 1.0)) * 100.0 for i in range(logical_cpus))
        return UtilizationSample(time.time(), per_core, sum(per_core) / max(logical_cpus, 1), 0.0, 0, 0)


class ExternalCpuMeter:
    """`with ExternalCpuMeter() as m: ...; m.result.cores` -> cores used by other processes.

    System-wide busy time minus this process's own CPU time. Cheap (two /proc reads each side)."""

    def __init__(self) -> None:
        self._proc = psutil.Process(os.getpid())
        self.result = ExternalCpu()

    @staticmethod
    def _system_busy() -> float:
        t = psutil.cpu_times()
        idle = t.idle + getattr(t, "iowait", 0.0)
        return sum(t) - idle

    def _own(self) -> float:
        t = self._proc.cpu_times()
        return t.user + t.system

    def __enter__(self) -> "ExternalCpuMeter":
        self._t0 = time.perf_counter()
        self._busy0 = self._system_busy()
        self._own0 = self._own()
        return self

    def __exit__(self, *exc: object) -> None:
        wall = time.perf_counter() - self._t0
        other = (self._system_busy() - self._busy0) - (self._own() - self._own0)
        self.result = ExternalCpu(wall, max(other, 0.0))


def other_cpu_cores(window_s: float = 0.25) -> float:
    """Cores' worth of CPU other processes use right now, averaged over `window_s`."""
    with ExternalCpuMeter() as meter:
        time.sleep(window_s)
    return meter.result.cores


def wait_for_quiet(expected_cores: float = 0.0, tolerance: float = 0.2, timeout_s: float = 30.0,
                   window_s: float = 0.25) -> float:
    """Wait until other processes use no more than `expected_cores + tolerance` cores (the
    expected part is load we started ourselves). Returns the seconds waited; gives up quietly
    after `timeout_s` (the caller's meter then records what it measured under)."""
    start = time.monotonic()
    while time.monotonic() - start < timeout_s:
        if other_cpu_cores(window_s) <= expected_cores + tolerance:
            break
    return time.monotonic() - start
