"""The seed project's documented API keeps working, verbatim."""
from __future__ import annotations

import subprocess
import sys
import textwrap

SEED_SNIPPET = textwrap.dedent('''
    from hardware_orchestrator import HardwareOrchestrator
    from train_orchestrated import TrainingEnvironment
    import numpy as np
    import time
    agent = HardwareOrchestrator()
    X_train = np.random.rand(100, 28, 28)
    y_train = np.random.randint(0, 10, 100)
    environment = TrainingEnvironment(X_train, y_train, {"name": "small_cnn", "layers": 3, "has_conv": True, "has_rnn": False})
    profile = agent.profile_workload({"name": "small_cnn", "layers": 3, "has_conv": True, "has_rnn": False}, 100)
    hw_state = {"ane_available": False, "cpu_utilization": 0.3, "timestamp": time.time()}
    agent.observe(hw_state, profile)
    backend = agent.think()
    result = agent.act(backend, environment)
    print(f"Training result: {result['message']}")
''')


def test_seed_snippet_runs_verbatim(tmp_path):
    script = tmp_path / "seed.py"
    script.write_text(SEED_SNIPPET)
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("Training result: trained 1 epoch(s) on cpu")


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
    from trainpilot.data import write_demo_dataset

    write_demo_dataset(tmp_path / "d", n=120)
    ok = subprocess.run([sys.executable, "-m", "train_orchestrated", "--model", "mlp", "--dataset", str(tmp_path / "d"), "--epochs", "1", "-q"], capture_output=True, text=True, timeout=120)
    assert ok.returncode == 0, ok.stderr
    bad = subprocess.run([sys.executable, "-m", "train_orchestrated", "--model", "mlp", "--dataset", str(tmp_path / "missing")], capture_output=True, text=True, timeout=120)
    assert bad.returncode == 1 and "no such file or directory" in bad.stderr and "Traceback" not in bad.stderr
