"""Every Python example of the seed project's README, verbatim, run in one fresh process in README
order (later examples use names the earlier ones made, as a reader running them in turn would).

The blocks are copied character for character from the seed's README (Quick Start, "What Can You
Do?", API Reference); only the API reference's list indentation is removed. The one name no block
defines, `training_environment` (the API reference's `act` example), is bound to the Quick Start's
environment by the harness, not by editing a block.
"""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap

QUICK_START = '''\
from hardware_orchestrator import HardwareOrchestrator
from train_orchestrated import TrainingEnvironment
import numpy as np
import time

# Initialize orchestrator and environment
agent = HardwareOrchestrator()
X_train = np.random.rand(100, 28, 28)
y_train = np.random.randint(0, 10, 100)
environment = TrainingEnvironment(X_train, y_train, {"name": "small_cnn", "layers": 3, "has_conv": True, "has_rnn": False})

# Profile workload
profile = agent.profile_workload({"name": "small_cnn", "layers": 3, "has_conv": True, "has_rnn": False}, 100)

# Observe hardware and decide backend
hw_state = {"ane_available": False, "cpu_utilization": 0.3, "timestamp": time.time()}
agent.observe(hw_state, profile)
backend = agent.think()

# Execute training
result = agent.act(backend, environment)
print(f"Training result: {result['message']}")
'''

WORKLOAD_PROFILING = '''\
from hardware_orchestrator import HardwareOrchestrator

orchestrator = HardwareOrchestrator()
profile = orchestrator.profile_workload(
    {"name": "small_cnn", "layers": 3, "has_conv": True, "has_rnn": False},
    dataset_size=10000
)
print(f"Model parameters: {profile['params']}, Depth: {profile['depth']}")
'''

PREDICTION_AND_SELECTION = '''\
# Assuming profile was gathered previously
hw_state = {"ane_available": True, "cpu_utilization": 0.2, "timestamp": time.time()}
ane_time = orchestrator.predict_performance(profile, "ane")
cpu_time = orchestrator.predict_performance(profile, "cpu")
backend, confidence = orchestrator.select_backend(profile, hw_state)
print(f"ANE: {ane_time:.2f}s, CPU: {cpu_time:.2f}s => Selected: {backend} (confidence: {confidence})")
'''

API_REFERENCE = [
    textwrap.dedent('''\
      model_config = {"name": "small_cnn", "layers": 3, "has_conv": True, "has_rnn": False}
      profile = orchestrator.profile_workload(model_config, dataset_size=10000)
      # {'params': 50000, 'layers': 3, 'has_conv': True, 'has_rnn': False, 'depth': 5, 'avg_layer_size': 1000}
      '''),
    textwrap.dedent('''\
      hw_state = {"ane_available": True, "cpu_utilization": 0.3, "timestamp": time.time()}
      orchestrator.observe(hw_state, profile)
      '''),
    textwrap.dedent('''\
      backend = orchestrator.think()  # Returns "ane" or "cpu"
      '''),
    textwrap.dedent('''\
      ane_time = orchestrator.predict_performance(profile, "ane")
      cpu_time = orchestrator.predict_performance(profile, "cpu")
      '''),
    textwrap.dedent('''\
      backend, confidence = orchestrator.select_backend(profile, hw_state)
      # ("cpu", 0.8) or ("ane", 0.85)
      '''),
    textwrap.dedent('''\
      result = orchestrator.act("cpu", training_environment)
      # {'status': 'success', 'backend': 'cpu', 'execution_time': 2.34, 'message': '...'}
      '''),
]

# After the blocks: what the last ones produced, and the agent's trace, as one JSON line.
REPORT = '''
import json as _json
print("REPORT " + _json.dumps({
    "ane": ane_time.to_dict(), "cpu": cpu_time.to_dict(), "select": [backend, confidence],
    "act": {k: result[k] for k in ("status", "backend", "execution_time", "message")},
    "trace": [{"text": s.text, "data": {k: v for k, v in s.data.items() if k != "hardware"}} for s in orchestrator.trace],
}, default=str))
'''


def test_the_seed_readme_examples_run_verbatim_in_order(tmp_path, trainpilot_home):
    blocks = [QUICK_START, WORKLOAD_PROFILING, PREDICTION_AND_SELECTION, *API_REFERENCE]
    harness = "\n".join(blocks[:3]) + "\ntraining_environment = environment\n" + "\n".join(blocks[3:]) + REPORT
    script = tmp_path / "seed_readme.py"
    script.write_text(harness)
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=180, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].startswith("Training result: trained 1 epoch(s) on cpu")
    assert lines[1] == "Model parameters: 20490, Depth: 3"
    # The documented selection: a conv model, ANE available, CPU 20 % busy -> ("ane", 0.85).
    assert lines[2].startswith("ANE: ") and lines[2].endswith("=> Selected: ane (confidence: 0.85)")
    report = json.loads(lines[-1].removeprefix("REPORT "))
    assert report["select"] == ["ane", 0.85]
    # No ANE on this machine: the figure is predicted on a described Apple machine, and says so.
    ane, cpu = report["ane"], report["cpu"]
    assert ane["machine"] == "Apple M2" and ane["note"] == "predicted for a described machine" and ane["predicted_s"] > 0
    assert cpu["machine"] == "this machine" and cpu["note"] is None and cpu["predicted_s"] > 0
    marked = [s for s in report["trace"] if s["data"].get("note") == "predicted for a described machine"]
    assert len(marked) == 2 and all("described machine Apple M2" in s["text"] for s in marked)  # both predict_performance(…, "ane") calls
    assert report["act"]["status"] == "success" and report["act"]["backend"] == "cpu"
