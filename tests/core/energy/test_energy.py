"""Energy: the RAPL reader on a fake powercap tree (wrap included), NVML through a fake module,
the estimate and its label, the meter's windows, predicted power per plan, and the objective."""
from __future__ import annotations

import time
from pathlib import Path

import pytest

from trainpilot.energy import (
    Energy, EnergyMeter, PlanPower, PowerFigures, RaplEnergy, annotate, check_objective, choose, counter_delta,
    find_zones, machine_figures, open_meter, rapl_availability, score,
)
from trainpilot.energy.cpu_estimate import CpuTimeEstimate
from trainpilot.energy.nvml import nvml_energy
from trainpilot.errors import ConfigError
from trainpilot.plans import Decision, Plan, PlanPrediction

RANGE_UJ = 262143328850  # a real package's max_energy_range_uj


def write_zone(path: Path, name: str, energy_uj: int, max_range: int = RANGE_UJ) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    (path / "name").write_text(name + "\n")
    (path / "energy_uj").write_text(f"{energy_uj}\n")
    (path / "max_energy_range_uj").write_text(f"{max_range}\n")
    return path


def fake_powercap(root: Path) -> Path:
    """Two packages with a dram and a core subzone each, a psys zone and the mmio duplicate, as a
    dual-socket Intel server lays them out."""
    for n in (0, 1):
        top = write_zone(root / f"intel-rapl:{n}", f"package-{n}", 1_000_000)
        write_zone(top / f"intel-rapl:{n}:0", "core", 500_000)
        write_zone(top / f"intel-rapl:{n}:1", "dram", 2_000_000)
    write_zone(root / "intel-rapl:2", "psys", 9_000_000)
    write_zone(root / "intel-rapl-mmio:0", "package-0", 1_000_000)
    return root


def set_uj(zone: Path, value: int) -> None:
    (zone / "energy_uj").write_text(f"{value}\n")


def test_counter_delta_handles_the_wrap() -> None:
    assert counter_delta(100, 250, 1000) == 150
    assert counter_delta(900, 50, 1000) == 150  # 100 to the top, 50 after it wrapped to 0


def test_rapl_reads_packages_and_dram_only(tmp_path: Path) -> None:
    root = fake_powercap(tmp_path)
    names = [z.name for z in find_zones(root)]
    assert names == ["package-0", "dram", "package-1", "dram"]  # no core (inside the package), psys or mmio
    meter = RaplEnergy(root)
    assert meter.source == "measured: RAPL package+dram"
    set_uj(root / "intel-rapl:0", 3_000_000)  # +2 J
    set_uj(root / "intel-rapl:1" / "intel-rapl:1:1", 2_500_000)  # +0.5 J
    assert meter.read_j() == pytest.approx(2.5)


def test_rapl_counter_wrap_between_reads(tmp_path: Path) -> None:
    zone = write_zone(tmp_path / "intel-rapl:0", "package-0", 990_000, max_range=1_000_000)
    meter = RaplEnergy(tmp_path)
    assert meter.poll_interval_s < 1.0  # a 1 J range must be read often to see each wrap
    set_uj(zone, 999_000)
    assert meter.read_j() == pytest.approx(0.009)
    set_uj(zone, 4_000)  # wrapped: 1_000 to the top, then 4_000
    assert meter.read_j() == pytest.approx(0.014)


def test_rapl_unavailable_says_why(tmp_path: Path) -> None:
    assert "no " in rapl_availability(tmp_path / "missing").reason
    (tmp_path / "empty").mkdir()
    assert "no RAPL package zone" in rapl_availability(tmp_path / "empty").reason


def test_meter_prefers_rapl_and_measures_an_epoch_window(tmp_path: Path) -> None:
    root = fake_powercap(tmp_path)
    with open_meter(Plan("cpu", threads=2), powercap_root=root, apple=None) as meter:
        set_uj(root / "intel-rapl:0", 2_000_000)
        mark = meter.mark()
        set_uj(root / "intel-rapl:0", 14_300_000)
        epoch = meter.since(mark)
    assert epoch.joules == pytest.approx(12.3) and not epoch.estimated and epoch.text == "12.3 J"
    assert meter.total().joules == pytest.approx(13.3)


def test_estimate_is_labelled_and_follows_cpu_time() -> None:
    figures = PowerFigures(4.0, "est.: 4 W per busy core (test figure)")
    with open_meter(Plan("cpu", threads=1), powercap_root="/nonexistent", figures=figures, apple=None) as meter:
        source = meter.sources[0]
        cpu0 = source.cpu_seconds()
        end = time.process_time() + 0.3
        while time.process_time() < end:
            pass
        cpu = source.cpu_seconds() - cpu0
    energy = meter.total()
    assert energy.estimated and energy.text.endswith(" J est.")
    assert energy.source == "est.: 4 W per busy core (test figure) x CPU time"
    assert cpu >= 0.25 and energy.joules == pytest.approx(4.0 * source.cpu_seconds(), rel=0.05)


def test_estimate_counts_other_processes_when_asked() -> None:
    import subprocess
    import sys

    child = subprocess.Popen([sys.executable, "-c", "import time\nend=time.process_time()+0.6\nwhile time.process_time()<end: pass"])
    estimate = CpuTimeEstimate(10.0, "est.: 10 W", pids=[child.pid])
    while child.poll() is None:
        estimate.read_j()  # the meter's poll: what it last saw stays counted after the process exits
        time.sleep(0.02)
    assert 10.0 * 0.3 <= estimate.read_j() <= 10.0 * 0.7


def test_children_are_looked_for_once_a_poll_interval_and_counted(monkeypatch: pytest.MonkeyPatch) -> None:
    """Walking /proc for children costs ~0.5 ms: an epoch's two readings must not each pay it (they
    did, part of what benchmarks/overhead.py measured TrainPilot adding to an epoch), yet a child
    that appears between two looks is still counted."""
    import subprocess
    import sys

    import psutil

    looks: list[float] = []
    children = psutil.Process.children

    def counted(self, *a, **k):  # type: ignore[no-untyped-def]
        looks.append(time.monotonic())
        return children(self, *a, **k)

    monkeypatch.setattr(psutil.Process, "children", counted)
    estimate = CpuTimeEstimate(10.0, "est.: 10 W")
    estimate.poll_interval_s = 0.2
    for _ in range(50):
        estimate.read_j()
    assert len(looks) == 1  # at creation; the readings right after it read the processes already known
    child = subprocess.Popen([sys.executable, "-c", "import time\nend=time.process_time()+0.6\nwhile time.process_time()<end: pass"])
    before = estimate.cpu_seconds()
    while child.poll() is None:
        estimate.read_j()
        time.sleep(0.02)
    assert estimate.cpu_seconds() - before >= 0.3  # the child, seen at a later look, counts
    assert all(b - a >= 0.2 for a, b in zip(looks, looks[1:]))


def test_a_bad_watts_figure_is_one_clear_error() -> None:
    with pytest.raises(ConfigError, match="TRAINPILOT_CPU_WATTS_PER_CORE"):
        machine_figures({"TRAINPILOT_CPU_WATTS_PER_CORE": "lots"})
    assert machine_figures({"TRAINPILOT_CPU_WATTS_PER_CORE": "7.5"}).cpu_w_per_core == 7.5


class FakeNvml:
    """pynvml's calls the adapter uses; `counter=False` is a pre-Volta GPU (power only)."""

    class NVMLError(Exception):
        pass

    def __init__(self, counter: bool):
        self.counter, self.energy_mj, self.power_mw = counter, 5_000_000, 200_000

    def nvmlInit(self) -> None: ...

    def nvmlDeviceGetHandleByIndex(self, index: int) -> str:
        return f"gpu{index}"

    def nvmlDeviceGetTotalEnergyConsumption(self, handle: str) -> int:
        if not self.counter:
            raise self.NVMLError("Not Supported")
        return self.energy_mj

    def nvmlDeviceGetPowerUsage(self, handle: str) -> int:
        return self.power_mw


def test_nvml_energy_counter_and_power_fallback() -> None:
    fake = FakeNvml(counter=True)
    source = nvml_energy(0, fake)
    fake.energy_mj += 42_500
    assert source.source == "measured: NVML energy counter" and source.read_j() == pytest.approx(42.5)
    fake = FakeNvml(counter=False)
    before = time.monotonic()
    source = nvml_energy(0, fake)
    assert source.source == "measured: NVML power x time" and not source.estimated
    time.sleep(0.05)
    joules = source.read_j()
    # 200 W over the time that really passed: at least the sleep, at most the whole span (a slow
    # machine may overshoot the sleep)
    assert 200.0 * 0.05 * 0.9 <= joules <= 200.0 * (time.monotonic() - before) * 1.01


def test_a_cuda_plan_adds_the_gpu_and_labels_the_sum(tmp_path: Path) -> None:
    root = fake_powercap(tmp_path)
    fake = FakeNvml(counter=True)
    meter = open_meter(Plan("cuda", device="cuda:0"), powercap_root=root, nvml=fake, apple=None)
    set_uj(root / "intel-rapl:0", 2_000_000)
    fake.energy_mj += 10_000
    total = meter.total()
    assert total.joules == pytest.approx(11.0) and total.source == "measured: RAPL package+dram + NVML energy counter"
    no_nvml = open_meter(Plan("cuda"), powercap_root=root, nvml=None, apple=None)
    assert no_nvml.label.startswith("measured: RAPL package+dram + est.:") and no_nvml.total().estimated


def test_meter_covers_a_plan_the_run_moves_to() -> None:
    meter = EnergyMeter([CpuTimeEstimate(5.0, "est.: 5 W")], figures=PowerFigures(5.0, "est.: 5 W"), nvml=None)
    meter.cover(Plan("cuda"))
    assert len(meter.sources) == 2 and "cuda" in meter.covers
    meter.cover(Plan("cuda"))
    assert len(meter.sources) == 2


# ---------------------------------------------------------------- predicted power and the objective

def prediction(plan: Plan, seconds: float, error: float = 0.05) -> PlanPrediction:
    return PlanPrediction(plan, seconds, source="roofline", detail={"relative_error": error})


def test_power_per_plan_is_estimated_until_measured_runs_calibrate_it() -> None:
    power = PlanPower(PowerFigures(5.0, "est.: 5 W per busy core"), logical_cpus=2)
    assert power.watts(Plan("cpu", threads=2)).watts == 10.0 and power.watts(Plan("cpu", threads=2)).estimated
    power.learn(Plan("cpu", threads=1), 30.0, "measured: RAPL package", 2.0)  # 15 W
    power.learn(Plan("cpu", threads=1), 12.0, "est.: 5 W per busy core x CPU time", 2.0)  # an estimate teaches nothing
    one = power.watts(Plan("cpu", threads=1))
    assert one.watts == 15.0 and not one.estimated and "1 run(s) of this plan" in one.source
    two = power.watts(Plan("cpu", threads=2))
    assert two.watts == 30.0 and "scaled to 2 thread(s)" in two.source


def test_estimated_runs_say_how_many_cores_a_plan_kept_busy() -> None:
    power = PlanPower(PowerFigures(5.0, "est.: 5 W per busy core"), logical_cpus=2)
    plan = Plan("cpu", threads=2)
    power.learn(plan, 12.0, "est.: 5 W per busy core x CPU time", 2.0)  # 1.2 cores busy on average: 6 W
    power.learn(plan, 99.0, "est.: 9 W per busy core (TRAINPILOT_CPU_WATTS_PER_CORE) x CPU time", 2.0)  # another figure: ignored
    watts = power.watts(plan)
    assert watts.watts == 6.0 and watts.estimated and "1 run(s) of this plan used" in watts.source
    assert power.watts(Plan("cpu", threads=1)).watts == 5.0  # no run of it: the figure


def test_a_split_plan_is_metered_and_keyed_by_its_workers() -> None:
    power = PlanPower(PowerFigures(5.0, "est.: 5 W per busy core"), logical_cpus=2)
    split = Plan.split([Plan("cuda", device="cuda:0"), Plan("cpu", threads=1)])
    watts = power.watts(split)
    assert watts.watts == 250.0 + 5.0 + 5.0 and watts.estimated and watts.source.startswith("cuda: est.: 250 W")
    power.learn(split, 100.0, "measured: RAPL package + NVML energy counter", 1.0)
    assert power.watts(split).watts == 100.0 and power.watts(Plan.split([Plan("cpu", threads=1)] * 2)).watts == 10.0
    meter = EnergyMeter([CpuTimeEstimate(5.0, "est.: 5 W")], figures=PowerFigures(5.0, "est.: 5 W"), nvml=None)
    meter.cover(split)
    assert meter.covers == {"cpu", "cuda"} and len(meter.sources) == 2


def test_annotate_puts_energy_beside_time() -> None:
    power = PlanPower(PowerFigures(5.0, "est.: 5 W per busy core"))
    p = annotate(prediction(Plan("cpu", threads=2), 3.0), power)
    assert p.detail["energy_j"] == 30.0 and p.detail["power_w"] == 10.0 and p.detail["energy_source"].startswith("est.")
    excluded = PlanPrediction(Plan("mps"), None, excluded_reason="not here")
    assert annotate(excluded, power) is excluded


def test_energy_objective_picks_the_lower_power_plan_when_times_are_close() -> None:
    power = PlanPower(PowerFigures(5.0, "est.: 5 W per busy core"))
    preds = [annotate(prediction(Plan("cpu", threads=2), 2.0), power), annotate(prediction(Plan("cpu", threads=1), 2.2), power)]
    by_time = Decision(Plan("cpu", threads=2), 2.0, 0.6, ("time: 2 threads",), 0.1, policy="cost-model")
    assert choose(preds, "time", by_time) is by_time
    by_energy = choose(preds, "energy", by_time)
    assert by_energy.plan == Plan("cpu", threads=1) and by_energy.predicted_s == 2.2  # 11 J against 20 J
    assert by_energy.margin == pytest.approx(20.0 / 11.0 - 1)
    assert any("not the fastest plan" in line and "20.0 J est." in line for line in by_energy.reasoning)
    # Far apart in time, 2 threads use less energy too (4 s x 5 W = 20 J > 1.5 s x 10 W = 15 J).
    far = [annotate(prediction(Plan("cpu", threads=2), 1.5), power), annotate(prediction(Plan("cpu", threads=1), 4.0), power)]
    assert choose(far, "energy", by_time).plan == Plan("cpu", threads=2)


def test_edp_is_energy_times_delay() -> None:
    power = PlanPower(PowerFigures(5.0, "est.: 5 W per busy core"))
    fast = annotate(prediction(Plan("cpu", threads=2), 2.0), power)  # 20 J, EDP 40
    slow = annotate(prediction(Plan("cpu", threads=1), 3.0), power)  # 15 J, EDP 45
    assert score(fast, "edp") == pytest.approx(40.0) and score(slow, "edp") == pytest.approx(45.0)
    decision = Decision(fast.plan, 2.0, 0.6, (), 0.5, policy="cost-model")
    assert choose([fast, slow], "energy", decision).plan == slow.plan
    assert choose([fast, slow], "edp", decision).plan == fast.plan


def test_rule_cascade_decisions_stand_and_bad_objectives_are_refused() -> None:
    rules = Decision(Plan("cpu", threads=2), None, 0.8, (), policy="rules")
    kept = choose([], "energy", rules)
    assert kept.plan == rules.plan and "rule cascade" in kept.reasoning[-1]
    with pytest.raises(ValueError, match="--objective must be one of time, energy, edp"):
        check_objective("cheap")


def test_energy_text_and_sum() -> None:
    assert Energy(12.34, "est.: x", True).text == "12.3 J est."
    assert Energy(4321.0, "measured: RAPL package").text == "4.32 kJ"
    total = Energy(1.0, "measured: RAPL package") + Energy(2.0, "est.: 250 W cuda", True)
    assert total.joules == 3.0 and total.estimated
    assert Energy.recorded(5.0, "measured: NVML energy counter").text == "5.00 J"
    assert Energy(None, "nothing to read").text == "n/a: nothing to read"


# ---------------------------------------------------------------- the agent's hook

class FastestFirst:
    """A calibrated-style predictor for the agent: FirstEstimate's times, decided by time."""

    policy = "cost-model"

    def __init__(self) -> None:
        from trainpilot.predict.first_estimate import FirstEstimate

        self.inner = FirstEstimate(2, throughput=lambda threads: 5e9 * (1 + 0.8 * (threads - 1)))  # 2 threads 1.8x one

    def predict(self, profile, plan, load):
        return self.inner.predict(profile, plan, load)

    def decide(self, profile, predictions, load, hardware):
        best = min((p for p in predictions if p.predicted_s is not None), key=lambda p: p.predicted_s)
        return Decision(best.plan, best.predicted_s, 0.7, ("fastest",), 0.1, policy="cost-model")

    def record(self, *args, **kwargs):
        pass


@pytest.fixture(scope="module")
def mlp_profile():
    from trainpilot.job.models import build_model
    from trainpilot.job.workload import profile_model

    return profile_model(build_model("mlp", (1, 28, 28), 10), (1, 28, 28), 10, 500, name="mlp", batch_size=64, epochs=1)


@pytest.mark.parametrize("objective, threads", [("time", 2), ("energy", 1)])
def test_agent_trace_shows_both_figures_and_chooses_by_objective(objective: str, threads: int, mlp_profile) -> None:
    from trainpilot.compat.orchestrator import HardwareOrchestrator, load_from_state
    from trainpilot.machine.probe import HardwareInfo
    from trainpilot.plans import Availability

    hardware = HardwareInfo("test", "Linux", "x86_64", "test cpu", 2, 2, 8 << 30, {
        "cpu": Availability(True), "ane": Availability(False, "not Apple Silicon"), "mps": Availability(False, "not macOS"),
        "cuda": Availability(False, "no CUDA device found")})
    agent = HardwareOrchestrator(predictor=FastestFirst(), hardware=hardware, objective=objective)
    result = agent.plan(mlp_profile, load_from_state({"cpu_utilization": 0.0}, 2))
    per_plan = [s.text for s in result.steps if s.text.startswith("cpu (") and "predicted" in s.text]
    assert len(per_plan) == 2 and all(" J est. (" in t for t in per_plan)  # time and joules for every plan
    assert result.decision.plan.threads == threads  # 1 thread: 1/1.8 the speed at half the power
    assert f"objective {objective}" in result.steps[-1].text


# ---------------------------------------------------------------- power measured by calibrate

class SteadyCounter:
    """A measured source drawing a steady 20 W: what a RAPL package reads under a steady load."""

    estimated, poll_interval_s, source = False, 30.0, "measured: test counter"

    def __init__(self) -> None:
        self.t0 = time.monotonic()

    def read_j(self) -> float:
        return 20.0 * (time.monotonic() - self.t0)

    def close(self) -> None: ...


def test_calibrate_measures_power_per_plan_and_the_agent_uses_it(tmp_path: Path) -> None:
    from trainpilot.energy.power_calibration import load_power, measure_power, save_power

    plans = [Plan("cpu", threads=1), Plan("cpu", threads=2), Plan("cpu", threads=2, mode="compiled")]
    burned: list[Plan] = []
    power, why = measure_power(plans, "box", seconds=0.1, meter_for=lambda plan: EnergyMeter([SteadyCounter()]),
                               burn=lambda plan, s: (burned.append(plan), time.sleep(s)))
    assert why == "" and power is not None and burned == plans[:2]  # compiled shares eager's draw
    assert set(power.watts) == {"cpu:1", "cpu:2"} and all(w == pytest.approx(20.0, rel=0.2) for w in power.watts.values())
    save_power(power, tmp_path)
    model = PlanPower.for_machine(None, "box", 2, figures=PowerFigures(5.0, "est.: 5 W"), calibration_dir=tmp_path)
    two = model.watts(Plan("cpu", threads=2, mode="compiled"))
    assert not two.estimated and two.source == "measured: test counter, calibration" and two.watts == power.watts["cpu:2"]
    assert load_power(tmp_path, "other machine") is None


def test_calibrate_measures_nothing_where_energy_is_only_estimated() -> None:
    from trainpilot.energy.power_calibration import measure_power

    power, why = measure_power([Plan("cpu", threads=1)], "box", seconds=0.01,
                               meter_for=lambda plan: open_meter(plan, powercap_root="/nonexistent", apple=None))
    assert power is None and "nothing measures energy here" in why and "est.:" in why
