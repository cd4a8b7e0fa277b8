"""Other work on the CPU: a real busy-loop load to measure against, and a meter that says how much
CPU everything *but the timed work* used while we timed something: other processes, and this
process's own other threads (the terminal app's event loop and sampler run beside the training
thread and take CPU, and the GIL, from it).

Why both: the load a plan will meet changes its best thread count (on 2 cores with one kept busy,
1 thread trains faster than 2; measured: docs/prediction.md#plans-and-calibration), so calibration
measures every plan idle *and* next to a real busy core. And a timing taken while something else
grabbed a core is not the state we meant to measure; the meter lets the caller notice and measure
again instead of learning noise.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

import psutil

if TYPE_CHECKING:
    from trainpilot.machine.monitor import UtilizationSample

# A pure-Python spin: one process keeps one core at 100% and touches almost no memory.
_SPIN = "import time\nend = time.monotonic() + {limit}\nwhile time.monotonic() < end:\n    pass\n"


class BusyLoad:
    """Start `cores` busy-loop processes; stop them on exit. Each one ends by itself after
    `limit_s` too, so a crashed parent never leaves a core spinning."""

    def __init__(self, cores: int = 1, limit_s: float = 600.0, settle_s: float = 0.3):
        self.cores, self.limit_s, self.settle_s = cores, limit_s, settle_s
        self.processes: list[subprocess.Popen[bytes]] = []

    def __enter__(self) -> BusyLoad:
        code = _SPIN.format(limit=float(self.limit_s))
        for _ in range(self.cores):
            self.processes.append(
                subprocess.Popen(
                    [sys.executable, "-c", code],
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
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
    """CPU used by everything except the timed work over a measured block."""

    wall_s: float = 0.0
    other_cpu_s: float = 0.0  # other processes and this process's own other threads (ui_cpu_s)
    ui_cpu_s: float = 0.0  # the part of it this process's own other Python threads used

    @property
    def cores(self) -> float:
        """Average number of cores the rest of the machine kept busy (this process's UI included)."""
        return self.other_cpu_s / self.wall_s if self.wall_s > 0 else 0.0

    @property
    def ui_cores(self) -> float:
        """Average cores this process's own threads besides the timed work used (a UI, a progress bar)."""
        return self.ui_cpu_s / self.wall_s if self.wall_s > 0 else 0.0

    def as_sample(self, logical_cpus: int) -> UtilizationSample:
        """The load a run actually met, as the sample `Predictor.record` takes: what a run is
        learnt under should be the load during it, not a glance before it started."""
        from trainpilot.machine.monitor import UtilizationSample

        per_core = tuple(max(0.0, min(self.cores - i, 1.0)) * 100.0 for i in range(logical_cpus))
        return UtilizationSample(
            time.time(), per_core, sum(per_core) / max(logical_cpus, 1), 0.0, 0, 0, ui_cores=self.ui_cores
        )


def with_ui_load(sample: UtilizationSample, seen_ui_cores: float, ui_cores: float) -> UtilizationSample:
    """`sample` with this process's UI counted at `ui_cores` instead of the `seen_ui_cores` its
    threads used while it was taken: the busy cores change by the difference, taken from (or added
    to) the cores in proportion to how busy each was, so other processes' load stays as seen."""
    from dataclasses import replace

    delta = 100.0 * (ui_cores - seen_ui_cores)  # percent of one core
    busy = sum(sample.per_core)
    if delta < 0 and busy > 0:
        per_core = tuple(max(c + delta * c / busy, 0.0) for c in sample.per_core)
    elif delta > 0:
        room = sum(100.0 - c for c in sample.per_core)
        per_core = tuple(min(c + delta * (100.0 - c) / room, 100.0) if room > 0 else c for c in sample.per_core)
    else:
        per_core = sample.per_core
    mean = sum(per_core) / max(len(per_core), 1)
    return replace(sample, per_core=per_core, cpu_percent=mean, ui_cores=round(ui_cores, 3))


# Python threads that train too (a split plan's workers, parallel/split_runner.py): the timed work, not load.
TRAINING_THREAD_PREFIXES = ("trainpilot-split",)

# Other processes whose CPU is this process's UI: the terminal app runs its session in a process of
# its own (run/process.py), and the training process counts the app's process as its UI, as it
# would count the app's threads were they in this process.
_UI_PROCESSES: dict[int, psutil.Process] = {}


def count_as_ui(pid: int) -> None:
    """From now on, meters in this process count process `pid`'s CPU as this process's UI load."""
    try:
        _UI_PROCESSES[pid] = psutil.Process(pid)
    except psutil.Error:  # gone already: nothing of it to count
        pass


_WORK_PROCESSES: dict[int, psutil.Process] = {}


def count_as_work(pids: list[int]) -> None:
    """From now on, meters in this process count these processes' CPU as the timed work's own, not
    as load: a job's DataLoader workers load its batches, the run itself."""
    for pid in pids:
        if pid in _WORK_PROCESSES:
            continue
        try:
            _WORK_PROCESSES[pid] = psutil.Process(pid)
        except psutil.Error:  # gone already: nothing of it to count
            pass
    for pid in [p for p, proc in _WORK_PROCESSES.items() if not proc.is_running()]:
        del _WORK_PROCESSES[pid]  # ended workers: a later process may reuse the pid


def _ui_processes_cpu(processes: list[psutil.Process]) -> dict[int, float]:
    out = {}
    for proc in processes:
        try:
            t = proc.cpu_times()
        except psutil.Error:  # the UI ended mid-block: the part it used before is lost (a slight undercount)
            continue
        out[proc.pid] = t.user + t.system
    return out


class ExternalCpuMeter:
    """`with ExternalCpuMeter() as m: ...; m.result.cores` -> cores used by everything but the timed work.

    The timed work is the thread that enters the meter plus the threads Python does not know
    (torch's intra-op pool works for it); this process's other Python threads (the terminal app's
    event loop, its sampler, a progress bar) count as load like another process does, because
    they compete for the same cores and for the GIL (`ui_cpu_s` says how much of it they were).
    System-wide busy time minus the timed work's own CPU time; cheap (a few /proc reads a side).
    A helper thread that ends inside the block takes its CPU time with it: a slight undercount."""

    def __init__(self) -> None:
        self._proc = psutil.Process(os.getpid())
        self.result = ExternalCpu()
        self._worker = threading.get_native_id()
        self._ui_processes = list(_UI_PROCESSES.values())

    @staticmethod
    def _system_busy() -> float:
        t = psutil.cpu_times()
        idle = t.idle + getattr(t, "iowait", 0.0)
        return sum(t) - idle

    def _own(self) -> float:
        t = self._proc.cpu_times()
        return t.user + t.system

    def _helpers(self) -> dict[int, float]:
        """CPU seconds so far of this process's Python threads other than the timed one."""
        ids = {t.native_id for t in threading.enumerate() if not t.name.startswith(TRAINING_THREAD_PREFIXES)} - {
            self._worker,
            None,
        }
        if not ids:
            return {}
        try:
            return {t.id: t.user_time + t.system_time for t in self._proc.threads() if t.id in ids}
        except (psutil.Error, OSError):  # some platforms refuse per-thread times: count none
            return {}

    def __enter__(self) -> ExternalCpuMeter:
        self._worker = threading.get_native_id()
        self._t0 = time.perf_counter()
        self._busy0 = self._system_busy()
        self._own0 = self._own()
        self._helpers0 = self._helpers()
        self._ui0 = _ui_processes_cpu(self._ui_processes)
        self._work0 = _ui_processes_cpu(list(_WORK_PROCESSES.values()))
        return self

    def __exit__(self, *exc: object) -> None:
        wall = time.perf_counter() - self._t0
        helpers = self._helpers()
        ui = sum(max(cpu - self._helpers0.get(tid, 0.0), 0.0) for tid, cpu in helpers.items())
        # Other processes: system-wide busy time minus this whole process's. Never below zero: the
        # two counters tick separately (a quiet machine reads a tick or two negative), and some
        # sandboxes' /proc/stat undercounts a process that /proc/self counts in full (CI read a negative
        # load there: docs/measurements.md#cited-in-the-code-prediction). This process's own other
        # threads are added whatever that reads.
        others = max((self._system_busy() - self._busy0) - (self._own() - self._own0), 0.0)
        # A UI in a process of its own is among the other processes already: moved to the UI's part,
        # and counted in full even where /proc/stat undercounts it (as this process's threads are).
        ui_process = sum(
            max(cpu - self._ui0.get(pid, cpu), 0.0) for pid, cpu in _ui_processes_cpu(self._ui_processes).items()
        )
        others = max(others - ui_process, 0.0)
        # The run's own worker processes (registered while the block ran, if not before) are its work.
        work = sum(
            max(cpu - self._work0.get(pid, 0.0), 0.0)
            for pid, cpu in _ui_processes_cpu(list(_WORK_PROCESSES.values())).items()
        )
        others = max(others - work, 0.0)
        self.result = ExternalCpu(wall, others + ui + ui_process, ui + ui_process)


def other_cpu_cores(window_s: float = 0.25) -> float:
    """Cores' worth of CPU other processes use right now, averaged over `window_s`."""
    with ExternalCpuMeter() as meter:
        time.sleep(window_s)
    return meter.result.cores


def wait_for_quiet(
    expected_cores: float = 0.0, tolerance: float = 0.2, timeout_s: float = 30.0, window_s: float = 0.25
) -> float:
    """Wait until other processes use no more than `expected_cores + tolerance` cores (the
    expected part is load we started ourselves). Returns the seconds waited; gives up quietly
    after `timeout_s` (the caller's meter then records what it measured under)."""
    start = time.monotonic()
    while time.monotonic() - start < timeout_s:
        if other_cpu_cores(window_s) <= expected_cores + tolerance:
            break
    return time.monotonic() - start


def observe_load(ui_steady: float | None = None) -> UtilizationSample:
    """The machine's load before deciding, with the part this process's own UI (the threads
    beside this one) adds: the agent plans for the load the run will meet, itself included.
    With `ui_steady` (the UI's own measure of its steady load), that replaces what the UI's
    threads used during the window."""
    from dataclasses import replace

    from trainpilot.machine.monitor import measure_load

    with ExternalCpuMeter() as meter:
        load = measure_load(0.3)
    seen = meter.result.ui_cores
    if ui_steady is None:
        return replace(load, ui_cores=round(seen, 3))
    return with_ui_load(load, seen, ui_steady)
