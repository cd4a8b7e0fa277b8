"""The agent: the seed's rule cascade, load-aware thread choice, and an honest trace."""
from __future__ import annotations

import time

import pytest

from trainpilot.compat.orchestrator import HardwareOrchestrator, load_from_state
from trainpilot.predict.first_estimate import LOW_CPU_UTILIZATION, FirstEstimate
from trainpilot.machine.probe import HardwareInfo
from trainpilot.plans import Availability
from trainpilot.job.models import build_model
from trainpilot.job.workload import profile_model


def two_core_machine(**backends: Availability) -> HardwareInfo:
    avail = {"cpu": Availability(True), "ane": Availability(False, "not Apple Silicon"), "mps": Availability(False, "not macOS"), "cuda": Availability(False, "no CUDA device found")}
    avail.update(backends)
    return HardwareInfo("test", "Linux", "x86_64", "test cpu", 2, 2, 8 << 30, avail)


def scaling_cpu(threads: int) -> float:
    """A fixed throughput (2 threads 1.8x one), so decisions do not depend on this machine's noise."""
    return 5e9 * (1 + 0.8 * (threads - 1))


def estimate() -> FirstEstimate:
    return FirstEstimate(2, throughput=scaling_cpu)


@pytest.fixture(scope="module")
def cnn_profile():
    model = build_model("small_cnn", (1, 28, 28), 10)
    return profile_model(model, (1, 28, 28), 10, 2000, name="small_cnn", batch_size=64, epochs=2)


def test_rule_cascade_is_the_seed_policy(cnn_profile):
    agent = HardwareOrchestrator(hardware=two_core_machine())
    rnn = {"has_rnn": True, "has_conv": False}
    conv = {"has_rnn": False, "has_conv": True}
    dense = {"has_rnn": False, "has_conv": False}
    assert agent.select_backend(conv, {"ane_available": False, "cpu_utilization": 0.1}) == ("cpu", 1.0)
    assert agent.select_backend(rnn, {"ane_available": True, "cpu_utilization": 0.1}) == ("cpu", 0.95)
    assert agent.select_backend(conv, {"ane_available": True, "cpu_utilization": LOW_CPU_UTILIZATION - 0.01}) == ("ane", 0.85)
    assert agent.select_backend(conv, {"ane_available": True, "cpu_utilization": LOW_CPU_UTILIZATION}) == ("cpu", 0.8)
    assert agent.select_backend(dense, {"ane_available": True, "cpu_utilization": 0.1}) == ("cpu", 0.8)


def test_agent_prefers_one_thread_when_another_process_holds_a_core(cnn_profile):
    agent = HardwareOrchestrator(predictor=estimate(), hardware=two_core_machine())
    busy = load_from_state({"per_core": [100.0, 3.0]}, 2)
    idle = load_from_state({"per_core": [2.0, 3.0]}, 2)
    assert agent.plan(cnn_profile, busy).decision.plan.threads == 1
    assert agent.plan(cnn_profile, idle).decision.plan.threads == 2


def test_trace_names_every_plan_and_every_exclusion(cnn_profile):
    agent = HardwareOrchestrator(predictor=estimate(), hardware=two_core_machine())
    result = agent.plan(cnn_profile, load_from_state({"cpu_utilization": 0.0}, 2))
    texts = [s.text for s in result.steps]
    assert any(t.startswith("cpu (1 thread): predicted") for t in texts)
    assert any(t.startswith("cpu (2 threads): predicted") for t in texts)
    assert "ane: excluded — not Apple Silicon" in texts
    assert "cuda: excluded — no CUDA device found" in texts
    assert texts[-1].startswith("decision: cpu (2 threads)")
    assert result.steps[-1].confidence == result.decision.confidence
    assert all(p.excluded for p in result.predictions if p.plan.backend != "cpu")


def test_thinking_is_fast_once_throughput_is_known(cnn_profile):
    agent = HardwareOrchestrator(predictor=estimate(), hardware=two_core_machine())
    load = load_from_state({"cpu_utilization": 0.2}, 2)
    agent.plan(cnn_profile, load)  # measures throughput once per thread count
    start = time.perf_counter()
    agent.plan(cnn_profile, load)
    assert time.perf_counter() - start < 0.05


def test_prediction_scales_with_epochs_and_data(cnn_profile):
    from dataclasses import replace

    agent = HardwareOrchestrator(predictor=estimate(), hardware=two_core_machine())
    base = agent.predict_performance(cnn_profile, "cpu")
    doubled = agent.predict_performance(replace(cnn_profile, epochs=4), "cpu")
    assert doubled == pytest.approx(2 * base, rel=0.01)
    # A backend this machine lacks is predicted on a described machine that has it, and says so.
    cuda = agent.predict_performance(cnn_profile, "cuda")
    assert cuda > 0 and cuda.described and cuda.machine == "Linux workstation, RTX 4090"
    assert not base.described and base.machine == "this machine"


def test_a_backend_no_machine_can_run_the_workload_on_raises_with_both_reasons():
    agent = HardwareOrchestrator(predictor=estimate(), hardware=two_core_machine())
    rnn = agent.profile_workload("rnn", 100)
    with pytest.raises(ValueError, match="no time estimate for backend 'ane': not here .*Apple M2: recurrent layers"):
        agent.predict_performance(rnn, "ane")


def test_think_requires_observe():
    agent = HardwareOrchestrator(hardware=two_core_machine())
    with pytest.raises(RuntimeError, match="observe"):
        agent.think()
