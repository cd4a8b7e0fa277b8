"""The seed project's documented API contract (its README's examples run verbatim in test_seed_readme.py)."""
from __future__ import annotations

import subprocess
import sys


def test_profile_contract():
    from hardware_orchestrator import HardwareOrchestrator

    profile = HardwareOrchestrator().profile_workload({"name": "small_cnn", "layers": 3, "has_conv": True, "has_rnn": False}, 100)
    for key in ("params", "layers", "has_conv", "has_rnn", "depth", "avg_layer_size", "flops_per_sample", "weight_bytes", "activation_bytes_per_sample", "dataset_size", "layer_kinds"):
        assert key in profile
    assert profile["has_conv"] and not profile["has_rnn"] and profile["layers"] == 3


def test_act_on_unavailable_backend_falls_back_and_says_so():
    import numpy as np

    from hardware_orchestrator import HardwareOrchestrator
    from train_orchestrated import TrainingEnvironment

    agent = HardwareOrchestrator()
    env = TrainingEnvironment(np.random.rand(60, 28, 28), np.random.randint(0, 10, 60), {"name": "small_cnn"})
    agent.observe({"ane_available": True, "cpu_utilization": 0.1}, agent.profile_workload("small_cnn", 60))
    result = agent.act("ane", env)
    assert result["status"] == "success" and result["backend"] == "cpu"
    assert "ane unavailable" in result["message"] and result["fallback_reason"]
    for key in ("status", "backend", "execution_time", "message", "val_accuracy", "loss"):
        assert key in result


def test_python_m_train_orchestrated_exit_codes(tmp_path):
    from trainpilot.job.data import write_demo_dataset

    write_demo_dataset(tmp_path / "d", n=120)
    ok = subprocess.run([sys.executable, "-m", "train_orchestrated", "--model", "mlp", "--dataset", str(tmp_path / "d"), "--epochs", "1", "-q"], capture_output=True, text=True, timeout=120)
    assert ok.returncode == 0, ok.stderr
    bad = subprocess.run([sys.executable, "-m", "train_orchestrated", "--model", "mlp", "--dataset", str(tmp_path / "missing")], capture_output=True, text=True, timeout=120)
    assert bad.returncode == 1 and "no such file or directory" in bad.stderr and "Traceback" not in bad.stderr
