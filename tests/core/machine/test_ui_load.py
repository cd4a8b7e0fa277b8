"""The agent is hardware-aware of itself: the CPU its own UI threads use beside training is load the
run meets, observed before deciding and recorded with the run, so
runs under the app do not pass for idle ones."""
from __future__ import annotations

import hashlib
import threading
import time

import pytest

from trainpilot.job.data import demo_dataset, validate
from trainpilot.machine.contention import ExternalCpuMeter
from trainpilot.run.session import SessionConfig, run_session


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


def test_a_proc_stat_that_undercounts_never_makes_the_ui_more_than_the_load(monkeypatch):
    """Before: other processes' part was system busy minus this process, unclamped; where a
    sandbox's /proc/stat undercounts (CI: -0.36 cores), the load came out below the UI's own part
    (busy 0.36 beside ui 0.72) and the run was recorded under less load than its UI made."""
    monkeypatch.setattr(ExternalCpuMeter, "_system_busy", staticmethod(lambda: 100.0))  # a counter that never moves
    with BusyHelperThread(), ExternalCpuMeter() as meter:
        end = time.perf_counter() + 0.5
        while time.perf_counter() < end:
            hashlib.sha256(b"y" * (1 << 16)).digest()
    assert meter.result.ui_cores > 0.1, meter.result  # the helper was seen
    assert meter.result.cores == pytest.approx(meter.result.ui_cores), meter.result


@pytest.fixture(scope="module")
def small_demo():
    full = demo_dataset(n=400)
    return validate(full.X, full.y, "demo")


def test_a_run_beside_a_busy_ui_thread_is_observed_and_recorded_under_that_load(small_demo):
    """Before: the meter subtracted the whole process, so a run slowed by its own UI was recorded
    as idle and taught headless predictions the UI's slowdown."""
    from trainpilot.compat.orchestrator import HardwareOrchestrator
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


def test_a_ui_that_states_its_steady_load_is_counted_at_that_not_at_its_startup_burst(small_demo):
    """The app tells the session its steady load (measured once its start-up was over); a burst of
    its threads during the agent's 0.3 s look must not make the agent plan for a busier machine.
    Before: the session had no expect_ui_load and counted the burst (here a whole busy thread)."""
    from trainpilot.compat.orchestrator import HardwareOrchestrator
    from trainpilot.run.session import TrainingSession

    session = TrainingSession(SessionConfig(model="mlp", epochs=1, backend="cpu", threads=1, record_history=False),
                              orchestrator=HardwareOrchestrator(), dataset=small_demo)
    session.expect_ui_load(0.05)
    with BusyHelperThread():  # the start-up burst, during the observation
        events = []
        for event in session.events():
            events.append(event)
            if event.kind == "HardwareObserved":
                break
    observed = events[-1]
    assert observed.hardware["ui_cores"] == pytest.approx(0.05)  # the busy-core arithmetic: the next test


def test_with_ui_load_moves_only_the_ui_part_of_the_busy_cores():
    from trainpilot.machine.monitor import UtilizationSample
    from trainpilot.machine.contention import with_ui_load

    seen = UtilizationSample(0.0, (90.0, 30.0), 60.0, 0.0, 0, 0, ui_cores=0.8)
    out = with_ui_load(seen, 0.8, 0.1)
    assert out.busy_cores == pytest.approx(1.2 - 0.7) and out.ui_cores == pytest.approx(0.1)
    assert out.per_core[0] > out.per_core[1]  # taken in proportion: the busier core stays busier
    up = with_ui_load(UtilizationSample(0.0, (10.0, 10.0), 10.0, 0.0, 0, 0), 0.0, 0.3)
    assert up.busy_cores == pytest.approx(0.5) and max(up.per_core) <= 100.0
