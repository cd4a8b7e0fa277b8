"""The probe says what exists and why not; the monitor reports real numbers."""
from __future__ import annotations

import platform

import numpy as np

from trainpilot.backends import probe
from trainpilot.machine.monitor import Monitor, Reading, measure_load


def test_probe_lists_every_backend_with_a_reason_when_unavailable():
    info = probe()
    assert set(info.backends) == {"cpu", "ane", "mps", "cuda"}
    assert info.backends["cpu"].available
    for name, avail in info.backends.items():
        assert avail.available or avail.reason, name
    if platform.system() == "Linux":
        assert not info.backends["ane"].available and not info.backends["mps"].available
        assert info.backends["ane"].display.startswith("n/a: ")
    assert info.logical_cpus >= 1 and info.memory_bytes > 0 and len(info.machine_id) == 12
    assert info.machine_id == probe().machine_id


def test_monitor_sees_this_process_working():
    monitor = Monitor()
    a = np.random.rand(400, 400)
    for _ in range(30):
        a = a @ a
        a /= np.abs(a).max()
    sample = monitor.sample()
    assert len(sample.per_core) == len(Monitor().sample().per_core)
    assert sample.busy_cores > 0.05
    assert sample.process_rss_bytes > 10 << 20
    assert 0 < sample.memory_percent < 100


def test_unavailable_reading_is_never_zero():
    reading = Reading("ANE power", None, "W", estimate=True, note="not Apple Silicon")
    assert reading.display == "n/a: not Apple Silicon"
    assert Reading("ANE power", 1.25, "W", estimate=True).display == "1.2 W, est."


def test_failing_sampler_reports_itself():
    def broken():
        raise RuntimeError("boom")

    sample = Monitor([broken]).sample()
    assert sample.readings[0].value is None and "boom" in sample.readings[0].note


def test_measure_load_is_bounded():
    sample = measure_load(0.05)
    assert all(0 <= v <= 100 for v in sample.per_core)
