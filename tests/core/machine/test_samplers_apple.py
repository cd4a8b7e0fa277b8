"""The Apple Silicon power sampler: tool choice, non-blocking sampling of a live stream, honest n/a.

A live tool is replayed by tests/fixtures/samplers/fake_tool.py (a real child process streaming a
recorded-format file), so the background reader, decoders and shutdown run for real on Linux.
"""
from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Callable

import pytest

from trainpilot.machine.monitor import Monitor, Reading
from trainpilot.machine.samplers import ApplePowerSampler, choose_power_tool, default_samplers
from trainpilot.machine.samplers.apple import NO_TOOL, PowerTool, sudo_without_prompt
from trainpilot.machine.samplers.power_formats import JsonLinesDecoder, PowermetricsDecoder, parse_macmon
from trainpilot.machine.samplers.tool_stream import ToolStream

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "samplers"
FAKE = str(FIXTURES / "fake_tool.py")


def _which(*present: str) -> Callable[[str], str | None]:
    return lambda name: f"/usr/bin/{name}" if name in present else None


def _never_sudo() -> bool:
    raise AssertionError("sudo must not be probed here")


# Both tools' fixtures end on a sample whose ANE power is 1.3426 W; their first samples differ from it.
LAST_ANE_W = 1.3426


def _last_sample_shown(readings: list[Reading]) -> bool:
    """The fixture's last sample has arrived: its lines come as separate writes, so a first value
    shown may still be an earlier sample's."""
    return readings[0].value is not None and abs(readings[0].value - LAST_ANE_W) < 1e-9


def _fake(name: str, *args: str, decoder=None) -> PowerTool:  # type: ignore[no-untyped-def]
    return PowerTool("macmon", (sys.executable, FAKE, str(FIXTURES / name), *args),
                     decoder or (lambda: JsonLinesDecoder(parse_macmon)))


def _wait_for(sampler: Callable[[], list[Reading]], predicate: Callable[[list[Reading]], bool], timeout: float = 10.0) -> list[Reading]:
    deadline = time.monotonic() + timeout
    while True:
        readings = sampler()
        if predicate(readings) or time.monotonic() > deadline:
            return readings
        time.sleep(0.02)


# ---------------------------------------------------------------- choosing a tool


def test_root_runs_powermetrics_directly_without_asking_sudo() -> None:
    tool = choose_power_tool(500, which=_which("powermetrics", "macmon"), euid=0, sudo_ok=_never_sudo)
    assert tool is not None and tool.name == "powermetrics"
    assert tool.argv == ("/usr/bin/powermetrics", "--samplers", "cpu_power,gpu_power", "-i", "500", "-f", "plist")
    assert isinstance(tool.decoder(), PowermetricsDecoder)


def test_passwordless_sudo_runs_powermetrics_with_sudo_n() -> None:
    tool = choose_power_tool(which=_which("powermetrics"), euid=501, sudo_ok=lambda: True)
    assert tool is not None and tool.argv[:3] == ("sudo", "-n", "/usr/bin/powermetrics")


def test_without_sudo_macmon_then_mactop() -> None:
    macmon = choose_power_tool(which=_which("powermetrics", "macmon", "mactop"), euid=501, sudo_ok=lambda: False)
    assert macmon is not None and macmon.argv == ("/usr/bin/macmon", "pipe", "-i", "1000")
    mactop = choose_power_tool(which=_which("powermetrics", "mactop"), euid=501, sudo_ok=lambda: False)
    assert mactop is not None and mactop.argv == ("/usr/bin/mactop", "--headless", "--interval", "1000")
    assert choose_power_tool(which=_which(), euid=501, sudo_ok=_never_sudo) is None


def test_sudo_probe_never_prompts() -> None:
    start = time.monotonic()
    assert isinstance(sudo_without_prompt(), bool)  # stdin is /dev/null and -n: it cannot wait on a password
    assert time.monotonic() - start < 6


# ---------------------------------------------------------------- sampling


def test_off_apple_silicon_the_ane_reading_is_na_with_the_reason() -> None:
    readings = ApplePowerSampler(system="Linux", machine="x86_64")()
    assert readings == [Reading("ANE power", None, "W", estimate=True, note="not Apple Silicon")]
    assert readings[0].display == "n/a: not Apple Silicon"
    assert default_samplers("Linux")[0]()[0].note == "not Apple Silicon"
    assert [type(s).__name__ for s in default_samplers("Linux")] == ["ApplePowerSampler", "CudaSampler"]
    assert [type(s).__name__ for s in default_samplers("Darwin")] == ["ApplePowerSampler"]


def test_live_tool_readings_are_estimates_and_calls_never_block() -> None:
    sampler = ApplePowerSampler(system="Darwin", machine="arm64", tool=_fake("macmon-pipe.jsonl", "--first-delay", "0.3", "--delay", "0.01", "--hang"))
    try:
        start = time.monotonic()
        first = sampler()
        assert time.monotonic() - start < 0.2, "the first call starts the tool in the background"
        assert first[0].value is None and first[0].note
        readings = _wait_for(sampler, _last_sample_shown)  # GPU 34.2 %, then 32.9 %
        by_name = {r.name: r for r in readings}
        assert by_name["ANE power"].display == "1.3 W, est."
        assert by_name["GPU power"].estimate and by_name["CPU power"].estimate
        assert by_name["GPU utilisation"].display == "32.9 %"  # activity is measured, not estimated
        assert sampler.tool is not None and sampler.tool.name == "macmon"
    finally:
        sampler.close()


def test_powermetrics_plist_stream_through_the_sampler() -> None:
    tool = _fake("powermetrics-plist.bin", "--hang", decoder=PowermetricsDecoder)
    sampler = ApplePowerSampler(system="Darwin", machine="arm64", tool=tool)
    try:
        readings = _wait_for(sampler, _last_sample_shown)
        assert readings[0].value == pytest.approx(LAST_ANE_W)
    finally:
        sampler.close()


def test_a_tool_that_exits_is_reported_not_frozen() -> None:
    sampler = ApplePowerSampler(system="Darwin", machine="arm64", tool=_fake("macmon-pipe.jsonl", "--exit-code", "3"))
    readings = _wait_for(sampler, lambda r: "exited" in r[0].note)
    assert readings[0].value is None and readings[0].note == "macmon exited (code 3)"


def test_silent_tool_is_waited_for_and_closed() -> None:
    sampler = ApplePowerSampler(system="Darwin", machine="arm64", tool=_fake("macmon-pipe.jsonl", "--first-delay", "60"))
    readings = _wait_for(sampler, lambda r: "waiting" in r[0].note)
    assert readings[0].note == "waiting for the first sample from macmon"
    start = time.monotonic()
    sampler.close()
    assert time.monotonic() - start < 3
    assert "exited" in sampler()[0].note


def test_missing_tool_and_no_tool_at_all() -> None:
    broken = PowerTool("macmon", ("/nonexistent/macmon", "pipe"), lambda: JsonLinesDecoder(parse_macmon))
    readings = _wait_for(ApplePowerSampler(system="Darwin", machine="arm64", tool=broken), lambda r: "could not" in r[0].note)
    assert readings[0].note.startswith("macmon could not start")
    none = ApplePowerSampler(system="Darwin", machine="arm64", chooser=lambda _ms: None)
    readings = _wait_for(none, lambda r: r[0].note == NO_TOOL)
    assert [r.name for r in readings] == ["ANE power", "GPU power", "CPU power", "GPU utilisation"]
    assert all(r.value is None and r.note == NO_TOOL for r in readings)


def test_stale_stream_stops_showing_the_old_value() -> None:
    stream = ToolStream("macmon", [sys.executable, FAKE, str(FIXTURES / "macmon-pipe.jsonl"), "--hang"],
                        lambda: JsonLinesDecoder(parse_macmon), stale_after_s=1.0)
    stream.start()
    try:
        # The fake prints its two lines as separate writes, so wait for both (not just the first)
        # before the quiet period starts; a fresh value must have been shown meanwhile.
        shown, deadline = False, time.monotonic() + 10
        while stream.samples < 2 and time.monotonic() < deadline:
            shown = shown or stream.latest().snapshot is not None
            time.sleep(0.02)
        assert stream.samples == 2
        assert shown or stream.latest().snapshot is not None
        time.sleep(1.2)
        state = stream.latest()
        assert state.snapshot is None and state.problem.startswith("no sample from macmon for")
    finally:
        stream.close()


def test_monitor_carries_the_readings() -> None:
    monitor = Monitor([ApplePowerSampler(system="Linux", machine="x86_64")])
    sample = monitor.sample()
    assert [r.display for r in sample.readings] == ["n/a: not Apple Silicon"]
