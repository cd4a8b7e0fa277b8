"""Live samplers: per-core CPU, memory, this process's RSS (psutil, everywhere), plus optional
accelerator readings from platform samplers. A reading that does not exist here is reported as
"n/a: reason", never as 0.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import psutil


@dataclass(frozen=True)
class Reading:
    """One accelerator figure. `value` is None when unavailable; `note` then says why."""

    name: str  # e.g. "ANE power", "GPU utilisation"
    value: float | None
    unit: str
    estimate: bool = False  # Apple power figures are model-based estimates: label them so
    note: str = ""

    @property
    def display(self) -> str:
        if self.value is None:
            return f"n/a: {self.note}" if self.note else "n/a"
        text = f"{self.value:.1f} {self.unit}"
        return f"{text}, est." if self.estimate else text


@dataclass(frozen=True)
class UtilizationSample:
    at: float
    per_core: tuple[float, ...]  # percent, one per logical CPU
    cpu_percent: float  # mean over cores
    memory_percent: float
    memory_used_bytes: int
    process_rss_bytes: int
    readings: tuple[Reading, ...] = field(default_factory=tuple)
    # Of the busy cores, how many this process's own threads besides training used (the terminal
    # app's event loop and sampler; machine/contention.py measures it): load the agent itself adds.
    ui_cores: float = 0.0

    @property
    def busy_cores(self) -> float:
        """How many cores' worth of work is running (sum of per-core utilisation)."""
        return sum(self.per_core) / 100.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "at": self.at,
            "per_core": list(self.per_core),
            "cpu_percent": self.cpu_percent,
            "memory_percent": self.memory_percent,
            "memory_used_bytes": self.memory_used_bytes,
            "process_rss_bytes": self.process_rss_bytes,
            "readings": [r.__dict__ for r in self.readings],
            "ui_cores": self.ui_cores,
        }


# An accelerator sampler is a callable returning readings; platform modules register theirs.
AcceleratorSampler = Callable[[], list[Reading]]


class Monitor:
    """Samples the machine. Cheap enough for 2+ Hz. Each Monitor keeps its own previous CPU times,
    so the TUI's sampler and the agent's observation never shorten each other's interval (psutil's
    own cpu_percent() shares one module-wide baseline)."""

    def __init__(self, accelerator_samplers: list[AcceleratorSampler] | None = None):
        self._process = psutil.Process(os.getpid())
        self._samplers = list(accelerator_samplers or [])
        self._last = psutil.cpu_times(percpu=True)

    def add_sampler(self, sampler: AcceleratorSampler) -> None:
        self._samplers.append(sampler)

    def _per_core_percent(self) -> tuple[float, ...]:
        now = psutil.cpu_times(percpu=True)
        out = []
        for before, after in zip(self._last, now, strict=False):
            total = sum(after) - sum(before)
            idle = (after.idle + getattr(after, "iowait", 0.0)) - (before.idle + getattr(before, "iowait", 0.0))
            out.append(0.0 if total <= 0 else max(0.0, min(100.0, 100.0 * (1.0 - idle / total))))
        self._last = now
        return tuple(out)

    def sample(self) -> UtilizationSample:
        per_core = self._per_core_percent()
        vm = psutil.virtual_memory()
        readings: list[Reading] = []
        for sampler in self._samplers:
            try:
                readings.extend(sampler())
            except Exception as exc:  # a failing sampler reports itself, it never stops the others
                readings.append(
                    Reading(getattr(sampler, "__name__", "sampler"), None, "", note=f"sampler failed: {exc}")
                )
        return UtilizationSample(
            at=time.time(),
            per_core=per_core,
            cpu_percent=sum(per_core) / max(len(per_core), 1),
            memory_percent=float(vm.percent),
            memory_used_bytes=int(vm.total - vm.available),
            process_rss_bytes=int(self._process.memory_info().rss),
            readings=tuple(readings),
        )


def measure_load(interval: float = 0.3) -> UtilizationSample:
    """One blocking sample over `interval` seconds: what the agent observes before deciding."""
    monitor = Monitor()
    time.sleep(interval)
    return monitor.sample()
