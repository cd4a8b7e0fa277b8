"""Real calibration on this machine (quick mode), the busy-loop load, and the fit."""
from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import psutil
import pytest
import torch

from trainpilot.backends import probe
from trainpilot.machine.monitor import UtilizationSample
from trainpilot.plans import Plan
from trainpilot.predict import CostModel, ensure_calibrated
from trainpilot.predict.calibration import load_calibration
from trainpilot.machine.contention import BusyLoad, ExternalCpuMeter
from trainpilot.predict.features import COLUMNS
from trainpilot.predict.fit import nnls, relative_nnls
from trainpilot.job.models import build_model
from trainpilot.job.workload import profile_model

MULTI_CORE = probe(include_backends=False).logical_cpus >= 2


def load(busy: float, cores: int) -> UtilizationSample:
    per = [0.0] * cores
    for i in range(cores):
        per[i] = max(0.0, min(busy - i, 1.0)) * 100
    return UtilizationSample(time.time(), tuple(per), sum(per) / cores, 30.0, 0, 0)


@pytest.fixture(scope="module")
def calibrated(tmp_path_factory: pytest.TempPathFactory):
    home = tmp_path_factory.mktemp("cal-home")
    model = CostModel.open(home, hardware=probe())
    seen: list[tuple[float, str]] = []
    threads_before = torch.get_num_threads()
    model.calibrate(progress=lambda f, m: seen.append((f, m)), quick=True)
    assert torch.get_num_threads() == threads_before  # every measurement restores the thread count
    return home, model, seen, True


def test_nnls_recovers_nonnegative_solutions() -> None:
    rng = np.random.default_rng(1)
    a = rng.random((15, 6))
    x = np.array([0.5, 0.0, 2.0, 0.0, 1.0, 0.25])
    assert np.allclose(nnls(a, a @ x), x, atol=1e-8)
    b = rng.normal(size=15)
    got = nnls(a, b)
    assert (got >= 0).all()
    coef, err = relative_nnls(a * [1e-3, 1, 1e9, 1, 1, 1], a @ x * 1e-3 + 1e-3)
    assert (coef >= 0).all() and err < 1.0


def test_quick_calibration_measures_every_plan_and_is_stored(calibrated) -> None:
    home, model, seen, measured = calibrated
    assert measured and model.is_calibrated
    cal = model.calibration
    assert cal.quick and cal.duration_s > 0
    # every plan but the compiled ones, whose eager steps are these and whose compiling is measured apart
    assert {p.plan for p in cal.plans.values()} == {p for p in model.plans() if p.mode is None}
    assert cal.compile is None
    compiled = next(p for p in model.plans() if p.mode == "compiled")
    profile = profile_model(build_model("mlp", (1, 28, 28), 10), (1, 28, 28), 10, 1000, name="mlp")
    assert "calibrate --compile" in model.predict(profile, compiled, load(0, cal.logical_cpus)).excluded_reason
    for pc in cal.plans.values():
        assert set(pc.idle.coef) == set(COLUMNS)
        assert all(v >= 0 for v in pc.idle.coef.values())
        assert pc.idle.coef["step"] + pc.idle.coef["layer"] > 0  # a step of a one-layer net costs something
        assert pc.memory_bandwidth_bytes_per_s and pc.memory_bandwidth_bytes_per_s > 1e8
        if MULTI_CORE and pc.plan.threads in (1, cal.logical_cpus):
            assert pc.busy is not None
    fractions = [f for f, _ in seen]
    assert fractions == sorted(fractions) and fractions[-1] == 1.0 and len(seen) > 10
    stored, why = load_calibration(home / "calibration", cal.machine_id)
    assert why is None and stored.to_dict() == cal.to_dict()
    reopened = CostModel.open(home, hardware=probe())
    assert reopened.is_calibrated and not ensure_calibrated(reopened)  # only the first time


def test_auto_calibration_can_be_switched_off(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRAINPILOT_AUTO_CALIBRATE", "0")
    model = CostModel.open(tmp_path, hardware=probe())
    assert not ensure_calibrated(model) and not model.is_calibrated


def test_calibrated_predictions_scale_with_the_work(calibrated) -> None:
    _home, model, _seen, _ = calibrated
    idle = load(0.0, model.logical_cpus)
    small = profile_model(build_model("small_cnn", (1, 28, 28), 10), (1, 28, 28), 10, 1000, name="small_cnn")
    times = {n: model.predict(profile_model(build_model("small_cnn", (1, 28, 28), 10), (1, 28, 28), 10, n, name="small_cnn"), Plan("cpu", threads=1), idle).predicted_s for n in (1000, 4000)}
    assert 3.0 < times[4000] / times[1000] < 4.5
    p = model.predict(small, Plan("cpu", threads=1), idle)
    assert p.source == "roofline" and p.detail["per_epoch_s"] > 0 and 0 < p.detail["relative_error"] < 2


def _contention(model: CostModel, profile, n: int) -> float:  # type: ignore[no-untyped-def]
    """How much slower the all-threads plan is predicted next to n - 1 busy cores than idle."""
    plan = Plan("cpu", threads=n)
    return model.predict(profile, plan, load(n - 1.0, n)).predicted_s / model.predict(profile, plan, load(0.0, n)).predicted_s


@pytest.mark.skipif(not MULTI_CORE, reason="needs at least 2 cores")
def test_one_busy_core_favours_one_thread(calibrated, tmp_path: Path) -> None:
    _home, model, _seen, _ = calibrated
    n = model.logical_cpus
    profile = profile_model(build_model("large_dense", (1, 28, 28), 10), (1, 28, 28), 10, 2000, name="large_dense")
    # Oversubscribed threads pay, as measured next to a real busy core (without a contention term
    # the ratio would be 1.0). On a shared machine a noisy idle measurement can hide it, which the
    # disturbance check does not always see (a fresh-clone CI run measured 1.20x once, and once
    # chose the all-threads plan by 10 %, and once by 5 % after a 1.3x contention): then the
    # calibration is measured again, at most twice, as a user would calibrate again.
    plans = [Plan("cpu", threads=1), Plan("cpu", threads=n)]

    def decided(model: CostModel):  # type: ignore[no-untyped-def]
        return model.decide(profile, [model.predict(profile, p, load(n - 1.0, n)) for p in plans], load(n - 1.0, n), {})

    for attempt in range(3):
        if model.calibration.notes:  # measured while other processes held cores: idle was not idle
            pytest.skip("calibration was disturbed by other processes: " + "; ".join(model.calibration.notes))
        if (_contention(model, profile, n) > 1.3 and decided(model).plan.threads == 1) or attempt == 2:
            break
        model = CostModel.open(tmp_path / f"again-{attempt}", hardware=probe())
        model.calibrate(quick=True)
    assert _contention(model, profile, n) > 1.15
    busy = decided(model)
    assert busy.plan.threads == 1 and busy.policy == "cost-model"


def test_corrupt_calibration_means_not_calibrated(tmp_path: Path) -> None:
    hw = probe()
    (tmp_path / "calibration").mkdir()
    (tmp_path / "calibration" / f"{hw.machine_id}.json").write_text("{ not json")
    model = CostModel.open(tmp_path, hardware=hw)
    assert not model.is_calibrated
    assert any("unreadable calibration" in n for n in model.notices)


@pytest.mark.skipif(not MULTI_CORE, reason="needs at least 2 cores")
def test_busy_load_is_real_and_stops() -> None:
    with BusyLoad(1, settle_s=0.2) as busy:
        pids = busy.pids
        assert all(psutil.pid_exists(p) for p in pids)
        with ExternalCpuMeter() as meter:
            time.sleep(0.5)
        assert meter.result.cores > 0.6  # the spinner really holds a core (other load only adds)
    for pid in pids:
        assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE


def test_calibration_file_is_plain_json(calibrated) -> None:
    home, model, _seen, _ = calibrated
    data = json.loads((home / "calibration" / f"{model.machine_id}.json").read_text())
    assert data["machine_id"] == model.machine_id and data["version"] == 2
