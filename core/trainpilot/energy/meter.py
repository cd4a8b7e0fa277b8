"""The energy meter that runs around a training run: the best source this machine offers for each
part of the plan, read in the background as often as each source needs, with windows (an epoch).

    with open_meter(plan) as meter:
        mark = meter.mark()
        ...                      # an epoch
        epoch = meter.since(mark)  # Energy(joules, source, estimated)
    run = meter.total()

Sources, best first. The CPU: RAPL package counters (Linux), the macOS power sampler (Apple
Silicon, which covers its GPU and ANE too), else the estimate from CPU time x watts per core. A
CUDA plan adds its GPU: NVML (energy counter, else power x time), else the board-power estimate.
An energy source has `source` (its label), `estimated`, `poll_interval_s`, `read_j()` (joules
since it was created; reading it often is what catches a counter's wrap) and `close()`.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from trainpilot.energy.cpu_estimate import CpuTimeEstimate, WallTimeEstimate
from trainpilot.energy.figures import PowerFigures, machine_figures
from trainpilot.energy.reading import Energy

if TYPE_CHECKING:
    from trainpilot.plans import Plan

LOG = logging.getLogger("trainpilot.energy")


@dataclass(frozen=True)
class Mark:
    joules: dict[int, float] = field(default_factory=dict)  # source index -> reading


class EnergyMeter:
    def __init__(
        self,
        sources: Iterable[Any],
        *,
        covers: Iterable[str] = ("cpu",),
        figures: PowerFigures | None = None,
        nvml: ModuleType | None | str = "auto",
    ):
        self.sources: list[Any] = list(sources)
        self.covers: set[str] = set(covers)  # backends whose energy some source counts
        self.figures = figures
        self._nvml = nvml
        self._lock = threading.Lock()
        self._last: list[float] = [0.0] * len(self.sources)
        self._start = Mark({i: 0.0 for i in range(len(self.sources))})
        self._problems: list[str] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # ------------------------------------------------------------ reading

    def _read(self, index: int) -> float:
        try:
            value = float(self.sources[index].read_j())
        except Exception as exc:  # a counter that went away mid-run: keep what it had counted
            text = f"{self.sources[index].source}: {type(exc).__name__}: {exc}"
            if text not in self._problems:
                self._problems.append(text)
                LOG.warning("energy reading failed (%s); keeping the last value", text)
            return self._last[index]
        self._last[index] = value
        return value

    def mark(self) -> Mark:
        with self._lock:
            return Mark({i: self._read(i) for i in range(len(self.sources))})

    def since(self, mark: Mark) -> Energy:
        """Energy from `mark` to now, summed over the parts, labelled by the sources used."""
        with self._lock:
            if not self.sources:
                return Energy(None, "no energy source")
            parts = [
                Energy(self._read(i) - mark.joules.get(i, 0.0), s.source, bool(s.estimated))
                for i, s in enumerate(self.sources)
            ]
        total = parts[0]
        for part in parts[1:]:
            total = total + part
        return total

    def total(self) -> Energy:
        return self.since(self._start)

    @property
    def label(self) -> str:
        """What the figures come from: "measured: RAPL package", "est.: ... x CPU time"."""
        return self.total().source

    @property
    def problems(self) -> list[str]:
        return list(self._problems)

    # ------------------------------------------------------------ a plan change mid-run

    def cover(self, plan: Plan) -> None:
        """Make sure the energy of `plan`'s device is counted (a run moved to the GPU mid-way; each
        worker of a split plan)."""
        if plan.workers:
            for worker in plan.workers:
                self.cover(worker)
            return
        if plan.backend in self.covers:
            return
        source = accelerator_source(plan, self.figures or machine_figures(), self._nvml)
        with self._lock:
            self.sources.append(source)
            self._last.append(0.0)
            self.covers.add(plan.backend)

    # ------------------------------------------------------------ the background reader

    def start(self) -> EnergyMeter:
        if self._thread is None and self.sources:
            self._thread = threading.Thread(target=self._poll, name="trainpilot-energy", daemon=True)
            self._thread.start()
        return self

    def _poll(self) -> None:
        due: dict[int, float] = {}
        while not self._stop.is_set():
            now = time.monotonic()
            with self._lock:
                for i, source in enumerate(self.sources):
                    if now >= due.get(i, 0.0):
                        self._read(i)
                        due[i] = now + float(source.poll_interval_s)
                wait = min(float(s.poll_interval_s) for s in self.sources)
            self._stop.wait(max(0.05, wait))

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2)
        for source in self.sources:
            try:
                source.close()
            except Exception:  # noqa: BLE001 - closing a sampler must not fail a run
                pass

    def __enter__(self) -> EnergyMeter:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.total()  # a last reading, so the total includes the very end
        self.close()


def accelerator_source(plan: Plan, figures: PowerFigures, nvml: ModuleType | None | str = "auto") -> Any:
    if plan.backend == "cuda":
        from trainpilot.energy.nvml import nvml_energy

        index = int(plan.device.split(":")[1]) if plan.device and ":" in plan.device else 0
        try:
            return nvml_energy(index, nvml)
        except OSError as exc:
            LOG.info("no GPU energy reading (%s); estimating", exc)
    watts, source = figures.accelerator(plan.backend)
    return WallTimeEstimate(watts, source)


def cpu_source(
    *,
    powercap_root: Path | str | None = None,
    figures: PowerFigures | None = None,
    pids: Iterable[int] | None = None,
    apple: Any = "auto",
) -> tuple[Any, set[str]]:
    """The CPU's source and the backends it covers: RAPL, the macOS sampler, or the estimate."""
    from trainpilot.energy.rapl import POWERCAP_ROOT, RaplEnergy, rapl_availability

    root = Path(powercap_root) if powercap_root is not None else POWERCAP_ROOT
    if rapl_availability(root):
        try:
            return RaplEnergy(root), {"cpu"}
        except (OSError, ValueError) as exc:
            LOG.info("RAPL unreadable (%s); estimating", exc)
    if apple is not None:
        from trainpilot.energy.powermetrics import apple_energy, powermetrics_availability

        if apple != "auto":  # a given sampler (tests, or the monitor's own)
            return apple_energy(apple), {"cpu", "mps", "ane"}
        if powermetrics_availability():
            return apple_energy(), {"cpu", "mps", "ane"}
    figures = figures or machine_figures()
    return CpuTimeEstimate(figures.cpu_w_per_core, figures.cpu_source, pids), {"cpu"}


def open_meter(
    plan: Plan | None = None,
    *,
    powercap_root: Path | str | None = None,
    nvml: ModuleType | None | str = "auto",
    pids: Iterable[int] | None = None,
    figures: PowerFigures | None = None,
    apple: Any = "auto",
) -> EnergyMeter:
    """A meter for a run on `plan` (None: the CPU only). Use it as a context manager, or call
    `start()` and `close()`. `pids`: whose CPU time an estimate counts (default: this process and
    its children). RAPL and NVML count the whole package / device: open one meter per machine."""
    figures = figures or machine_figures()
    source, covers = cpu_source(powercap_root=powercap_root, figures=figures, pids=pids, apple=apple)
    meter = EnergyMeter([source], covers=covers, figures=figures, nvml=nvml)
    if plan is not None:
        meter.cover(plan)
    return meter
