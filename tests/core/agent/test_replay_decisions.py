"""benchmarks/replay_decisions.py predicts a kept decisions-benchmark history again: with unchanged
code it must give back the predictions that were recorded, from the runs before each case."""
from __future__ import annotations

import random
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[3] / "benchmarks"


@pytest.fixture
def kept_history(calibrated_model, tmp_path):
    """A small history written the way decisions.py writes one: per case, every plan predicted
    first, then each run recorded under its bench-<pass>-<state>-<case>-<plan> id."""
    from trainpilot.compat.orchestrator import load_from_state
    from trainpilot.job.data import demo_dataset
    from trainpilot.plans import Plan
    from trainpilot.agent.planning import profile_job

    model = calibrated_model
    idle = load_from_state({"cpu_utilization": 0.0}, model.logical_cpus)
    data = demo_dataset(300)
    cases = {"mlp l2 n300 b64": profile_job("mlp", data, epochs=1)[0], "small_cnn l3 n300 b64": profile_job("small_cnn", data, epochs=1)[0]}
    plans = (Plan("cpu", threads=1), Plan("cpu", threads=2))
    rng = random.Random(2)
    predicted = {}
    for pass_no in range(3):
        for label, profile in cases.items():
            ahead = {plan: model.predict(profile, plan, idle) for plan in plans}
            for plan, p in ahead.items():
                run_id = f"bench-{pass_no}-idle-{label}-{plan.label}"
                predicted[run_id] = (p.predicted_s, p.detail["interval"]["kind"])
                model.record(profile, plan, idle, p.predicted_s, p.predicted_s * rng.uniform(0.8, 1.3),
                             run_id=run_id, status="success", epochs_done=1)
    return tmp_path, predicted


def test_a_replay_gives_back_the_recorded_predictions(kept_history, monkeypatch):
    home, predicted = kept_history
    monkeypatch.syspath_prepend(str(BENCH))
    import replay_decisions

    runs = replay_decisions.replay(home)
    assert len(runs) == len(predicted) == 12
    for r in runs:
        recorded_s, recorded_kind = predicted[f"bench-{r.pass_no}-{r.state}-{r.case}-{r.plan}"]
        assert r.predicted_s == pytest.approx(recorded_s, rel=0.01)
        assert r.kind == recorded_kind and r.low_s <= r.predicted_s <= r.high_s
    assert {r.kind for r in runs if r.pass_no == 0} == {"cold"} and {r.kind for r in runs if r.pass_no == 2} == {"warm"}
    rows = dict(replay_decisions.report(home, runs))
    assert rows["80 % intervals' coverage (all passes)"].endswith("of 12")
    assert "target <= oracle + 1 point" in rows["warm MAPE (pass 3) vs oracle"]
    sys.modules.pop("replay_decisions", None)
    sys.modules.pop("decisions", None)


def test_a_home_without_a_benchmark_history_is_refused_in_one_line(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(BENCH))
    import replay_decisions

    with pytest.raises(SystemExit, match="no calibration or history"):
        replay_decisions.replay(tmp_path)
    sys.modules.pop("replay_decisions", None)
    sys.modules.pop("decisions", None)
