"""Cost models and loads for the tests: a model of this machine calibrated from a written
description (deterministic), idle and busy samples, small real jobs to profile and train."""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path

import numpy as np

from trainpilot.backends import probe
from trainpilot.job.data import Dataset
from trainpilot.job.models import build_model
from trainpilot.job.workload import profile_model
from trainpilot.machine.monitor import UtilizationSample
from trainpilot.machine.target_profiles import TargetBackend, TargetMachine
from trainpilot.plans import Plan
from trainpilot.predict import CostModel
from trainpilot.predict.derive import calibration_for_target
from trainpilot.predict.history import History
from trainpilot.run.trainer import Trainer


def idle(cores: int = 2) -> UtilizationSample:
    return UtilizationSample(time.time(), (2.0,) * cores, 2.0, 30.0, 0, 0)


def busy_one(cores: int = 2) -> UtilizationSample:
    per = (100.0,) + (2.0,) * (cores - 1)
    return UtilizationSample(time.time(), per, sum(per) / cores, 30.0, 0, 0)


def described(cpu_gflops: float = 50.0) -> TargetMachine:
    return TargetMachine(
        name="two-core test box", description="written for the tests", sources=("tests",), system="Linux",
        machine="x86_64", logical_cpus=2, performance_cores=2, memory_bytes=8 * 2**30, cpu_flops_per_core=cpu_gflops * 1e9,
        backends={"cpu": TargetBackend(peak_flops=2 * cpu_gflops * 2e9, memory_bandwidth_bytes_per_s=20e9, precision="fp32")},
    )


def this_machine_model(tmp_path: Path, cpu_gflops: float = 50.0) -> CostModel:
    """A cost model for this machine whose calibration comes from a (deliberately rough) description."""
    hw = probe(include_backends=False)
    cal = replace(calibration_for_target(described(cpu_gflops)), machine_id=hw.machine_id, described=None)
    return CostModel(machine_id=hw.machine_id, logical_cpus=2, calibration=cal, calibration_dir=None, history=History(tmp_path / "h.sqlite3"))


def small_job(width: int, n: int = 384, batch: int = 32, epochs: int = 1):
    rng = np.random.default_rng(width)
    X = rng.standard_normal((n, 1, 12, 12)).astype(np.float32)
    y = rng.integers(0, 4, n)
    data = Dataset(X, y, "arrays", 4)
    config = {"name": "mlp", "layers": 2, "width": width}
    profile = profile_model(build_model(config, data.sample_shape, 4), data.sample_shape, 4, n, name="mlp", batch_size=batch, epochs=epochs)
    return config, data, profile


def train_for_real(config, data, profile, threads: int = 1, repeats: int = 1) -> list[float]:
    """Seconds of training steps of `repeats` real runs, as the session counts them."""
    times = []
    for _ in range(repeats):
        trainer = Trainer(build_model(config, data.sample_shape, 4), data, Dataset(data.X[:0], data.y[:0], "arrays", 4),
                          batch_size=profile.batch_size, lr=1e-3, seed=0)
        trainer.use_plan(Plan("cpu", threads=threads))
        times.append(sum(trainer.train_step(e, s).seconds for e in range(profile.epochs) for s in range(trainer.steps_per_epoch)))
    return times


def zoo_profile(name: str, batch: int = 64):
    return profile_model(build_model(name, (1, 28, 28), 10), (1, 28, 28), 10, 640, name=name, batch_size=batch, epochs=1)
