"""Apple Silicon power sampler: ANE / GPU / CPU watts (estimates) and GPU activity.

Which tool, in order:
1. `powermetrics` (Apple's), only when this process is root or `sudo -n true` succeeds: sudo is
   never allowed to prompt, so a user is never asked for a password by a monitor.
2. `macmon pipe` (no root needed), when installed.
3. `mactop --headless`, when installed.
Choosing may run `sudo -n true`, so it happens on a background thread together with the tool
itself; a call to the sampler only reads the latest parsed sample and returns at once.
"""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
import threading
from collections.abc import Callable
from dataclasses import dataclass

from trainpilot.machine.monitor import Reading
from trainpilot.machine.samplers.power_formats import (
    Decoder,
    JsonLinesDecoder,
    PowermetricsDecoder,
    PowerSnapshot,
    parse_macmon,
    parse_mactop,
)
from trainpilot.machine.samplers.tool_stream import ToolStream

READING_NAMES = ("ANE power", "GPU power", "CPU power", "GPU utilisation")
NO_TOOL = "no power sampler: install macmon (brew install macmon) or allow sudo -n for powermetrics"


@dataclass(frozen=True)
class PowerTool:
    name: str
    argv: tuple[str, ...]
    decoder: Callable[[], Decoder]


def is_apple_silicon(system: str | None = None, machine: str | None = None) -> bool:
    return (system or platform.system()) == "Darwin" and (machine or platform.machine()) == "arm64"


def sudo_without_prompt() -> bool:
    """True when sudo would run a command now without asking (-n: fail instead of prompting)."""
    if shutil.which("sudo") is None:
        return False
    try:
        done = subprocess.run(
            ["sudo", "-n", "true"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            timeout=5,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


def choose_power_tool(
    interval_ms: int = 1000,
    *,
    which: Callable[[str], str | None] = shutil.which,
    euid: int | None = None,
    sudo_ok: Callable[[], bool] = sudo_without_prompt,
) -> PowerTool | None:
    interval = str(int(interval_ms))
    powermetrics = which("powermetrics")
    if powermetrics:
        args = (powermetrics, "--samplers", "cpu_power,gpu_power", "-i", interval, "-f", "plist")
        if (os.geteuid() if euid is None else euid) == 0:
            return PowerTool("powermetrics", args, PowermetricsDecoder)
        if sudo_ok():
            return PowerTool("powermetrics", ("sudo", "-n", *args), PowermetricsDecoder)
    macmon = which("macmon")
    if macmon:
        return PowerTool("macmon", (macmon, "pipe", "-i", interval), lambda: JsonLinesDecoder(parse_macmon))
    mactop = which("mactop")
    if mactop:
        return PowerTool(
            "mactop", (mactop, "--headless", "--interval", interval), lambda: JsonLinesDecoder(parse_mactop)
        )
    return None


def snapshot_readings(snapshot: PowerSnapshot) -> list[Reading]:
    note = f"via {snapshot.source}"
    gpu_active = None if snapshot.gpu_active is None else snapshot.gpu_active * 100.0
    return [
        Reading("ANE power", snapshot.ane_w, "W", estimate=True, note=note),
        Reading("GPU power", snapshot.gpu_w, "W", estimate=True, note=note),
        Reading("CPU power", snapshot.cpu_w, "W", estimate=True, note=note),
        Reading("GPU utilisation", gpu_active, "%", note=note),
    ]


def unavailable_readings(reason: str) -> list[Reading]:
    return [
        Reading(name, None, "%" if name.endswith("utilisation") else "W", estimate=name.endswith("power"), note=reason)
        for name in READING_NAMES
    ]


class ApplePowerSampler:
    """A monitor.AcceleratorSampler. Call `close()` when done to stop the tool it started."""

    __name__ = "apple power"

    def __init__(
        self,
        *,
        interval_ms: int = 1000,
        tool: PowerTool | None = None,
        chooser: Callable[[int], PowerTool | None] = choose_power_tool,
        system: str | None = None,
        machine: str | None = None,
    ):
        self.interval_ms = interval_ms
        self._tool = tool
        self._chooser = chooser
        self._apple = is_apple_silicon(system, machine)
        self._stream: ToolStream | None = None
        self._status = "starting the power sampler"
        self._lock = threading.Lock()
        self._started = False
        self._closed = False

    @property
    def tool(self) -> PowerTool | None:
        return self._tool

    def _start(self) -> None:
        tool = self._tool or self._chooser(self.interval_ms)
        with self._lock:
            if self._closed:
                return
            if tool is None:
                self._status = NO_TOOL
                return
            self._tool = tool
            self._stream = ToolStream(
                tool.name, list(tool.argv), tool.decoder, stale_after_s=max(5.0, 5 * self.interval_ms / 1000)
            )
            self._stream.start()

    def __call__(self) -> list[Reading]:
        if not self._apple:
            return [Reading("ANE power", None, "W", estimate=True, note="not Apple Silicon")]
        if not self._started:
            self._started = True
            threading.Thread(target=self._start, name="trainpilot-power-start", daemon=True).start()
        stream = self._stream
        if stream is None:
            return unavailable_readings(self._status)
        state = stream.latest()
        if state.snapshot is None:
            return unavailable_readings(state.problem)
        return snapshot_readings(state.snapshot)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            stream = self._stream
        if stream is not None:
            stream.close()
