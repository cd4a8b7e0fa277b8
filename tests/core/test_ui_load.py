"""The agent is hardware-aware of itself: the CPU its own UI threads use beside training is load the
run meets, observed before deciding and recorded with the run (issue 12, point 3)."""
from __future__ import annotations

import hashlib
import threading
import time

import pytest

from trainpilot.data import demo_dataset, validate
from trainpilot.predict.contention import ExternalCpuMeter
from trainpilot.session import SessionConfig, run_session


class BusyHelperThread:
    """A thread of this process that keeps about one core busy without holding the GIL (hashlib
    releases it on large buffers), as a stand-in for a UI's event loop that never starves training."""

    def __init__(self) -> None:
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._spin, name="busy-helper", daemon=True)
        self.cpu_s = 0.0  # its own CPU time so far, as it measures it

    def _spin(self) -> None:
        block = b"x" * (1 << 20)
        start = time.thread_time()
        while not self.stop.is_set():
            hashlib.sha256(block).digest()
            self.cpu_s = time.thread_time() - start

    def __enter__(self) -> "BusyHelperThread":
        self.thread.start()
        time.sleep(0.05)
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(5)


def test_meter_counts_this_process_other_threads_but_not_the_timed_one():
    with BusyHelperThread() as helper:
        before = helper.cpu_s
        with ExternalCpuMeter() as meter:
            own = time.thread_time()
            end = time.perf_counter() + 0.8
            while time.perf_counter() < end:  # the timed work itself: never counted as load
                hashlib.sha256(b"y" * (1 << 16)).digest()
            own = time.thread_time() - own
        helper_s = helper.cpu_s - before
    tick = 0.05  # per-thread times come in scheduler ticks
    assert helper_s > 0.1 and own > 0.1  # both really ran (the machine may be shared)
    assert abs(meter.result.ui_cpu_s - helper_s) < tick + 0.1 * helper_s, (meter.result, helper_s, own)
    assert meter.result.cores >= meter.result.ui_cores
    with ExternalCpuMeter() as quiet:
        time.sleep(0.3)
    assert quiet.result.ui_cores < 0.1


@pytest.fixture(scope="module")
def small_demo():
    full = demo_dataset(n=400)
    return validate(full.X, full.y, "demo")


def test_a_run_beside_a_busy_ui_thread_is_observed_and_recorded_under_that_load(small_demo):
    """Before: the meter subtracted the whole process, so a run slowed by its own UI was recorded
    as idle and taught headless predictions the UI's slowdown."""
    from trainpilot.agent import HardwareOrchestrator
    from trainpilot.paths import history_db_path
    from trainpilot.predict import History

    agent = HardwareOrchestrator()
    with BusyHelperThread():
        result, events = run_session(SessionConfig(model="mlp", epochs=2, backend="cpu", threads=1), orchestrator=agent, dataset=small_demo)
    assert result["status"] == "success"
    observed = next(e for e in events if e.kind == "HardwareObserved")
    assert observed.hardware["ui_cores"] > 0.15  # counted in what the agent decides on
    assert "this app's own UI" in observed.text
    (record,) = History(history_db_path()).records(agent.hardware.machine_id, 10)
    assert record.busy_cores > 0.15, record  # the load fields include the UI's own load
    assert record.ui_cores is not None and 0.15 < record.ui_cores <= record.busy_cores + 1e-9


def test_a_split_plan_worker_thread_is_training_not_ui_load():
    from concurrent.futures import ThreadPoolExecutor

    def work() -> None:
        end = time.perf_counter() + 0.4
        while time.perf_counter() < end:
            hashlib.sha256(b"z" * (1 << 20)).digest()

    with ThreadPoolExecutor(1, thread_name_prefix="trainpilot-split") as pool, ExternalCpuMeter() as meter:
        pool.submit(work).result()
    assert meter.result.ui_cpu_s < 0.05, meter.result
