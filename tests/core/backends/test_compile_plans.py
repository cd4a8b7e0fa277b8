"""torch.compile as a CPU plan: offered with the reason when it cannot run, trained for real, fallen
back from when compiling fails, measured by calibration, and chosen only where it pays."""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch

from trainpilot.backends import get_backend
from trainpilot.backends.compiled import COMPILED, compile_availability
from trainpilot.plans import Availability, Plan
from trainpilot.predict.compile_cost import CompileCalibration, CompileSample, fit_compile
from trainpilot.predict.microbench import BenchSpec
from trainpilot.run.session import SessionConfig, run_session

from cost_models import idle, small_job, this_machine_model

COMPILES = compile_availability()
needs_compiler = pytest.mark.skipif(not COMPILES, reason=f"torch.compile cannot run here: {COMPILES.reason}")


def test_cpu_offers_compiled_plans_after_the_eager_ones() -> None:
    plans = get_backend("cpu").plans(2)
    assert plans == [Plan("cpu", threads=1), Plan("cpu", threads=2), Plan("cpu", threads=1, mode=COMPILED), Plan("cpu", threads=2, mode=COMPILED)]
    assert plans[3].label == "cpu (2 threads, compiled)" and plans[1].is_eager_cpu and not plans[3].is_eager_cpu


def test_without_a_compiler_the_compiled_plans_say_why(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "")
    monkeypatch.delenv("CXX", raising=False)
    compile_availability.cache_clear()
    try:
        _c, _d, profile = small_job(16)
        verdict = get_backend("cpu").supports_plan(profile, Plan("cpu", threads=1, mode=COMPILED))
        assert not verdict and "no C++ compiler" in verdict.reason
        assert get_backend("cpu").supports_plan(profile, Plan("cpu", threads=1))
    finally:
        compile_availability.cache_clear()


def _dataset(tmp_path: Path, n: int = 256) -> Path:
    rng = np.random.default_rng(3)
    X = rng.standard_normal((n, 1, 8, 8)).astype(np.float32)
    y = (X.reshape(n, -1).sum(axis=1) > 0).astype(np.int64)
    (tmp_path / "data").mkdir()
    np.save(tmp_path / "data" / "X_train.npy", X)
    np.save(tmp_path / "data" / "y_train.npy", y)
    return tmp_path / "data"


def _config(data: Path, **kw) -> SessionConfig:
    # 256 samples, 10 % held out: 230 train in batches of 46, so one static graph
    return SessionConfig(model={"name": "mlp", "layers": 2, "width": 16}, dataset=str(data), epochs=2, batch_size=46,
                         backend="cpu", threads=1, record_history=False, **kw)


@needs_compiler
@pytest.mark.slow
def test_a_compiled_run_trains_like_an_eager_one(tmp_path: Path) -> None:
    data = _dataset(tmp_path)
    eager, _ = run_session(_config(data))
    compiled, events = run_session(_config(data, compile=True))
    assert compiled["status"] == "success", compiled["message"]
    assert compiled["plan"]["mode"] == COMPILED and compiled["fallback_reason"] is None
    assert compiled["loss"] == pytest.approx(eager["loss"], rel=1e-3)  # the same arithmetic, fused
    assert compiled["val_accuracy"] == pytest.approx(eager["val_accuracy"], abs=0.02)


def test_a_compiled_plan_that_fails_falls_back_to_eager_cpu(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Compiling can fail where eager PyTorch does not (an operator inductor cannot lower, a
    compiler error): the run goes back to its last good state on eager CPU and finishes."""
    from trainpilot.backends import cpu

    class Uncompilable(torch.nn.Module):
        def __init__(self, inner: torch.nn.Module):
            super().__init__()
            self.inner = inner

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            raise RuntimeError("backend='inductor' raised: CppCompileError: C++ compile error")

    monkeypatch.setattr(cpu, "compile_model", Uncompilable)
    monkeypatch.setattr(cpu, "compile_availability", lambda: Availability(True))
    data = _dataset(tmp_path)
    result, _ = run_session(_config(data, compile=True))
    assert result["status"] == "success"
    assert result["plan"] == Plan("cpu", threads=1).to_dict()
    assert "CppCompileError" in result["fallback_reason"]
    assert [c["source"] for c in result["plan_changes"]] == ["user", "fallback"]


def _compile_cal(ratio: float, per_layer_s: float) -> CompileCalibration:
    return CompileCalibration(threads=2, once_s=1.0, per_layer_s={"dense": per_layer_s, "conv": 0.0, "recurrent": 0.0},
                              step_ratio={"dense": ratio}, step_overhead_s={"dense": 0.0}, torch_version=torch.__version__)


def test_compiled_plans_are_chosen_only_where_compiling_pays(tmp_path: Path) -> None:
    model = this_machine_model(tmp_path)
    model.calibration = replace(model.calibration, compile=_compile_cal(ratio=0.5, per_layer_s=2.0))  # mlp: 2 layers
    eager, compiled = Plan("cpu", threads=2), Plan("cpu", threads=2, mode=COMPILED)

    def decide(epochs: int):
        _c, _d, profile = small_job(256, n=4096, batch=64, epochs=epochs)
        predictions = [model.predict(profile, p, idle()) for p in (eager, compiled)]
        return predictions, model.decide(profile, predictions, idle(), {})

    (short_eager, short_compiled), short = decide(1)
    assert short_compiled.predicted_s == pytest.approx(0.5 * short_eager.detail["per_epoch_s"] + 1.0 + 2 * 2.0, rel=0.05)
    assert short_compiled.detail["breakdown_s"]["compile"] == pytest.approx(5.0)
    assert "compiling takes ~5.0s" in model.explain(short_compiled)
    long_epochs = int(12 / short_eager.detail["per_epoch_s"]) + 1  # the run long enough to win back 5 s at half the step time
    (_e, _c2), long = decide(long_epochs)
    assert short.plan == eager and long.plan == compiled
    model.calibration = replace(model.calibration, compile=_compile_cal(ratio=1.5, per_layer_s=2.0))  # compiled steps slower: never
    assert decide(long_epochs)[1].plan == eager


def test_compiled_runs_teach_only_compiled_plans(tmp_path: Path) -> None:
    model = this_machine_model(tmp_path)
    model.calibration = replace(model.calibration, compile=_compile_cal(ratio=1.0, per_layer_s=0.5))
    _c, _d, profile = small_job(64)
    eager, compiled = Plan("cpu", threads=1), Plan("cpu", threads=1, mode=COMPILED)
    before = model.predict(profile, eager, idle()).predicted_s
    guess = model.predict(profile, compiled, idle()).predicted_s
    for i in range(3):
        model.record(profile, compiled, idle(), guess, 3 * guess, run_id=f"c{i}", status="success", epochs_done=1)
    assert model.predict(profile, compiled, idle()).predicted_s > 2 * guess
    assert model.predict(profile, eager, idle()).predicted_s == pytest.approx(before, rel=0.02)


def test_fit_recovers_per_layer_compile_time_and_the_step_model() -> None:
    def sample(name: str, kind: str, layers: dict[str, int], eager: float) -> CompileSample:
        compile_s = {"dense": 2.0, "conv": 4.0, "recurrent": 0.0}[kind] * sum(layers.values())
        compiled = (0.8 * eager + 0.002) if kind == "conv" else 1.2 * eager + 0.001
        return CompileSample(name, kind, layers, eager, compiled, compile_s + (3.0 if name == "a" else 0.0), compile_s)

    samples = [sample("a", "dense", {"dense": 2}, 0.001), sample("b", "dense", {"dense": 3}, 0.04),
               sample("c", "conv", {"conv": 3, "dense": 1}, 0.01), sample("d", "conv", {"conv": 2, "dense": 1}, 0.03),
               sample("e", "recurrent", {"recurrent": 1, "dense": 1}, 0.004)]  # dynamo leaves an LSTM net to eager
    cc = fit_compile(samples, 2, torch.__version__, 1.0)
    assert cc.per_layer_s == pytest.approx({"dense": 2.0, "conv": 4.0, "recurrent": 0.0})
    assert cc.once_s == pytest.approx(3.0)
    assert cc.step_ratio["conv"] == pytest.approx(0.8, rel=1e-3) and cc.step_overhead_s["conv"] == pytest.approx(0.002, rel=1e-2)
    assert CompileCalibration.from_dict(cc.to_dict()) == cc


@needs_compiler
@pytest.mark.slow
def test_compile_calibration_measures_for_real_and_is_kept_by_a_plain_calibration(tmp_path: Path) -> None:
    from trainpilot.backends import probe
    from trainpilot.predict import CostModel

    hw = probe()
    derived = this_machine_model(tmp_path).calibration  # the eager side, without measuring it here
    model = CostModel(machine_id=hw.machine_id, logical_cpus=hw.logical_cpus, calibration=replace(derived, logical_cpus=hw.logical_cpus),
                      calibration_dir=tmp_path / "calibration", history=None, available_backends=["cpu"])
    threads_before = torch.get_num_threads()
    seen: list[float] = []
    cal = model.calibrate_compile(progress=lambda f, _m: seen.append(f), specs=(BenchSpec("dense", (16,), 16, 2, 16),))
    assert torch.get_num_threads() == threads_before
    (sample,) = cal.compile.samples
    assert sample.first_compile_s > 0.2 and sample.recompile_s > 0.05  # compiling a graph takes real time
    assert sample.eager_step_s > 0 and sample.compiled_step_s > 0 and cal.compile.per_layer_s["dense"] > 0
    assert seen == sorted(seen) and seen[-1] == 1.0
    _c, _d, profile = small_job(16)
    assert model.predict(profile, Plan("cpu", threads=1, mode=COMPILED), idle()).predicted_s > 0.2
    kept = model.calibrate(quick=True).compile  # a later eager calibration keeps what compiling measured
    reopened = CostModel.open(tmp_path, hardware=probe())
    assert kept == cal.compile and reopened.calibration.compile == cal.compile
