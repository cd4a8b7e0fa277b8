"""Memory: a large .npy dataset is streamed from disk, not loaded; what would not fit is refused
up front with the predicted need."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from faultkit.doubles import FlakyBackend, install
from faultkit.procs import child_env
from trainpilot.job.data import load_dataset
from trainpilot.errors import DatasetError
from trainpilot.run.session import SessionConfig, TrainingSession
from trainpilot_tui.cli import main

MEMPROBE = Path(__file__).parent / "faultkit" / "memprobe.py"
FEATURES, SAMPLES = 256, 512 * 1024  # 512 MiB of float32 features


def write_large_npy(directory: Path) -> int:
    """X_train.npy written in 32 MiB chunks (never whole in this process either)."""
    directory.mkdir()
    X = np.lib.format.open_memmap(directory / "X_train.npy", mode="w+", dtype=np.float32, shape=(SAMPLES, FEATURES))
    block = np.random.default_rng(0).random((32768, FEATURES), dtype=np.float32)
    for start in range(0, SAMPLES, len(block)):
        X[start : start + len(block)] = block
    X.flush()
    del X
    np.save(directory / "y_train.npy", (np.arange(SAMPLES) % 10).astype(np.int64))
    return (directory / "X_train.npy").stat().st_size


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="RssAnon is read from Linux's /proc")
def test_a_large_npy_dataset_trains_in_bounded_memory(tmp_path, trainpilot_home):
    size = write_large_npy(tmp_path / "large")
    done = subprocess.run([sys.executable, str(MEMPROBE), str(tmp_path / "large")], capture_output=True, text=True, env=child_env(trainpilot_home), timeout=300)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["status"] == "success", report["message"]
    print(f"anonymous memory: +{(report['peak'] - report['baseline']) / 2**20:.0f} MiB training 1 epoch on {size / 2**20:.0f} MiB in {report['seconds']:.1f}s")
    grown = report["peak"] - report["baseline"]
    # Loading the features would take 512 MiB; streaming them takes the labels, index arrays and
    # one batch at a time (~60 MB here).
    assert size >= 512 * 2**20
    assert grown < 160 * 2**20, f"anonymous memory grew by {grown / 2**20:.0f} MiB on a {size / 2**20:.0f} MiB dataset"


def test_a_dataset_too_large_to_load_is_refused_with_the_predicted_need(tmp_path, trainpilot_home, monkeypatch, capsys):
    import trainpilot.job.data as data

    X = np.zeros((2000, 1000), np.float32)  # 8 MB of features in a .npz (loaded, not mapped)
    np.savez_compressed(tmp_path / "big.npz", X=X, y=np.zeros(2000, np.int64))
    monkeypatch.setattr(data, "available_memory_bytes", lambda: 12 * 10**6)
    with pytest.raises(DatasetError) as caught:
        load_dataset(tmp_path / "big.npz")
    assert str(caught.value).startswith(f"{tmp_path / 'big.npz'}: too large to load: loading its arrays (8.02 MB) with their float32/int64 copies needs about 16 MB of memory and 12 MB is available")
    assert main(["headless", "run", "--dataset", str(tmp_path / "big.npz"), "-q"]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"error: {tmp_path / 'big.npz'}: too large to load") and "\n" not in err
    assert not (trainpilot_home / "runs").exists() or not any((trainpilot_home / "runs").iterdir())


def test_a_plan_that_does_not_fit_the_host_is_refused_before_training(tmp_path, trainpilot_home, monkeypatch, capsys):
    import trainpilot.job.data as data

    directory = data.write_demo_dataset(tmp_path / "demo", n=200)
    monkeypatch.setattr(data, "available_memory_bytes", lambda: 200 * 10**6)  # the dataset itself fits
    # small_cnn keeps ~340 kB of activations per sample: a batch of 1000 needs ~0.7 GB.
    code = main(["headless", "run", "--model", "small_cnn", "--dataset", str(directory), "--batch-size", "1000", "--backend", "cpu", "-q"])
    err = capsys.readouterr().err.strip()
    assert code == 1 and "\n" not in err
    assert err.startswith(f"error: {directory}: training small_cnn on 180 samples with cpu")
    assert "needs about" in err and "activations" in err and "at batch 1000" in err and "200 MB of memory available" in err
    assert not (trainpilot_home / "runs").exists() or not any((trainpilot_home / "runs").iterdir())
    # The same job at a batch that fits trains.
    assert main(["headless", "run", "--model", "small_cnn", "--dataset", str(directory), "--batch-size", "32", "--epochs", "1", "--backend", "cpu", "-q"]) == 0


def test_a_plan_that_does_not_fit_the_device_is_refused(trainpilot_home):
    class SmallDevice(FlakyBackend):
        def memory_budget_bytes(self, plan):  # type: ignore[no-untyped-def]
            return 2 * 10**6

    from trainpilot.job.data import demo_dataset, validate

    full = demo_dataset(n=200)
    undo = install(SmallDevice("none"))
    try:
        session = TrainingSession(SessionConfig(model="large_dense", epochs=1, backend="cuda", record_history=False), dataset=validate(full.X, full.y, "demo"))
        events = list(session.events())
    finally:
        undo()
    assert session.finished.status == "failed"
    assert "large_dense" in session.finished.message and "cuda:0's memory" in session.finished.message and "2 MB" in session.finished.message
    assert not any(e.kind in ("StepProgressed", "CheckpointSaved") for e in events)
