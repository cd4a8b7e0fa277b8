"""The Hardware panel: per-core CPU, memory, this process's RSS, each backend's state, and the
accelerator readings the core's samplers give (estimates labelled as such), with short histories.

It only holds reactive state; the screen's message handlers set it. Watchers push the state into
the child widgets, so a sample costs a few label updates and three sparkline redraws.
"""
from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.content import Content
from textual.reactive import reactive
from textual.widgets import Label

from trainpilot.machine.monitor import UtilizationSample

from .. import format as fmt
from ..styles import tcss_beside
from ..plan_book import BackendState
from .core_bars import CoreBars
from .readout import Readout
from .trend import Trend

STATE_STYLE = {"active": "bold $success", "idle": "$text-muted", "n/a": "$text-muted", "unknown": "$text-muted"}


def backend_lines(states: tuple[BackendState, ...]) -> Content:
    if not states:
        return Content.from_markup("[$text-muted]backends: not observed yet[/]")
    width = max(len(s.name) for s in states)
    lines = []
    for s in states:
        if s.state == "active":
            detail = f"active · {s.detail}" if s.detail else "active"
        elif s.state == "idle":
            detail = "idle"
        elif s.state == "n/a":
            detail = f"n/a: {s.detail}"
        else:
            detail = s.detail
        lines.append(Content.assemble((f"{s.name:<{width}}  ", "bold"), (detail, STATE_STYLE.get(s.state, ""))))
    return Content("\n").join(lines)


def reading_lines(sample: UtilizationSample | None) -> Content:
    if sample is None:
        return Content("")
    if not sample.readings:
        return Content.from_markup("[$text-muted]ANE/GPU: n/a: no accelerator sampler on this machine[/]")
    width = max(len(r.name) for r in sample.readings)
    lines = [
        Content.assemble((f"{r.name:<{width}}  ", "bold"), (r.display, "$text-muted" if r.value is None else "$accent"))
        for r in sample.readings
    ]
    return Content("\n").join(lines)


class HardwarePanel(Vertical):
    DEFAULT_CSS = tcss_beside(__file__)
    SCOPED_CSS = False  # the .tcss also has rules for the screen's width classes

    sample: reactive[UtilizationSample | None] = reactive(None, repaint=False)
    history: reactive[tuple[UtilizationSample, ...]] = reactive(tuple, repaint=False)
    backends: reactive[tuple[BackendState, ...]] = reactive(tuple, repaint=False)

    def compose(self) -> ComposeResult:
        with Horizontal(classes="metric"):
            yield Label("CPU", classes="metric-name")
            yield Trend(100.0, id="cpu-trend")
            yield Readout(id="cpu-value", classes="metric-value")
        yield CoreBars(id="cores")
        with Horizontal(classes="metric"):
            yield Label("Mem", classes="metric-name")
            yield Trend(100.0, id="mem-trend")
            yield Readout(id="mem-value", classes="metric-value")
        with Horizontal(classes="metric"):
            yield Label("RSS", classes="metric-name")
            yield Trend(None, id="rss-trend")
            yield Readout(id="rss-value", classes="metric-value")
        yield Readout(backend_lines(()), id="backends")
        yield Readout(id="readings")

    def on_mount(self) -> None:
        self.border_title = "Hardware"
        self._cpu, self._mem, self._rss, self._readings = (self.query_one(f"#{name}", Readout) for name in ("cpu-value", "mem-value", "rss-value", "readings"))
        self._cores = self.query_one(CoreBars)
        self._trends = tuple(self.query_one(f"#{name}", Trend) for name in ("cpu-trend", "mem-trend", "rss-trend"))

    def watch_sample(self, sample: UtilizationSample | None) -> None:
        if sample is None:
            return
        self._cpu.update(f"{sample.cpu_percent:3.0f}%")
        self._mem.update(f"{sample.memory_percent:3.0f}% {fmt.size(sample.memory_used_bytes)}")
        self._rss.update(fmt.size(sample.process_rss_bytes))
        self._cores.per_core = sample.per_core
        self._readings.update(reading_lines(sample))

    def watch_history(self, history: tuple[UtilizationSample, ...]) -> None:
        cpu, mem, rss = self._trends
        cpu.values = tuple(s.cpu_percent for s in history)
        mem.values = tuple(s.memory_percent for s in history)
        rss.values = tuple(float(s.process_rss_bytes) for s in history)

    def watch_backends(self, states: tuple[BackendState, ...]) -> None:
        self.query_one("#backends", Readout).update(backend_lines(states))
