"""Split plans and multi-rank plans in the cost model and the agent: offered, predicted from the
same calibration as single-device plans, chosen only when predicted faster, refused with figures."""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from trainpilot.compat.orchestrator import HardwareOrchestrator
from trainpilot.backends import probe
from trainpilot.parallel.link import Link, fit_link, ring_allreduce_s
from trainpilot.parallel.rank_plans import RankSpec, choose_ranks_or_single, predict_ranks
from trainpilot.predict.split_cost import ADAM_PASSES, split_step
from trainpilot.plans import SPLIT, Plan
from trainpilot.predict.calibration import StateRates
from trainpilot.predict.features import features_of

from cost_models import idle, this_machine_model, zoo_profile as _profile

TWO_CPU = Plan.split([Plan("cpu", threads=1), Plan("cpu", threads=1)])
FAST_LINK = Link(1e11, 1e-6, "test: as good as memory")


def test_a_split_plan_is_stored_in_the_four_plan_fields() -> None:
    plan = Plan.split([Plan("cuda", device="cuda:0"), Plan("cpu", threads=3)])
    assert plan == Plan(SPLIT, mode="cuda:0+cpu:3") and Plan.from_dict(plan.to_dict()) == plan
    assert plan.workers == (Plan("cuda", device="cuda:0"), Plan("cpu", threads=3))
    assert TWO_CPU.label == "split: cpu (1 thread) + cpu (1 thread)" and Plan("cpu", threads=2).workers == ()


def test_split_step_adds_the_interpreter_lock_and_the_combine(tmp_path: Path) -> None:
    model = this_machine_model(tmp_path)
    feats = features_of(_profile("mlp"))
    step = split_step(feats, TWO_CPU, 0.0, model.calibration)
    assert step is not None and sum(step.shares) == 64 and step.shares == (32, 32)
    lock = sum(w.fixed_s for w in step.workers)
    assert step.parallel_s == pytest.approx(max(lock, max(step.worker_s)))
    assert step.combine_s == pytest.approx(step.optimizer_s * 3 / ADAM_PASSES)
    # each worker is predicted next to the other one: one core busy for it
    assert [w.busy_cores for w in step.workers] == [1.0, 1.0]


def test_agent_refuses_the_split_when_predicted_slower_and_says_why(tmp_path: Path) -> None:
    model = this_machine_model(tmp_path)
    agent = HardwareOrchestrator(predictor=model, hardware=probe())
    result = agent.plan(_profile("mlp"), idle(), {})
    split = next(p for p in result.predictions if p.plan == TWO_CPU)
    assert split.predicted_s is not None and split.detail["split"]["shares"] == [32, 32]
    assert result.decision.plan != TWO_CPU and split.predicted_s > result.decision.predicted_s
    why = [s.text for s in result.steps if s.text.startswith(f"{TWO_CPU.label} not chosen")]
    assert len(why) == 1 and "slower than" in why[0] and "interpreter lock" in why[0] and "combine" in why[0]
    think = next(s.text for s in result.steps if s.text.startswith(f"{TWO_CPU.label}: predicted"))
    assert "shares 32+32" in think


def test_agent_picks_the_split_when_it_is_predicted_fastest(tmp_path: Path) -> None:
    model = this_machine_model(tmp_path)
    cal = model.calibration
    two = cal.plans["cpu:2"]
    slow = StateRates({k: v * 3.0 for k, v in two.idle.coef.items()}, two.idle.fit_error)  # 2 threads scale badly here
    model.calibration = replace(cal, plans={**cal.plans, "cpu:2": replace(two, idle=slow)})
    result = HardwareOrchestrator(predictor=model, hardware=probe()).plan(_profile("small_cnn"), idle(), {})
    assert result.decision.plan == TWO_CPU
    assert not any("not chosen" in s.text for s in result.steps)


def test_ring_allreduce_formula() -> None:
    link = Link(1e9, 1e-4, "test")
    assert ring_allreduce_s(1e6, 1, link) == 0.0
    assert ring_allreduce_s(1e6, 2, link) == pytest.approx(1e6 / 1e9 + 2 * 1e-4)
    assert ring_allreduce_s(1e6, 4, link) == pytest.approx(1.5 * 1e6 / 1e9 + 6 * 1e-4)
    with pytest.raises(ValueError):
        ring_allreduce_s(1e6, 0, link)
    bandwidth, latency = fit_link([(b, ring_allreduce_s(b, 2, link)) for b in (1e3, 1e5, 1e6, 4e6)], 2)
    assert bandwidth == pytest.approx(1e9) and latency == pytest.approx(1e-4)


def test_proportional_rank_shares_beat_equal_ones_when_a_rank_is_slow(tmp_path: Path) -> None:
    model = this_machine_model(tmp_path)
    profile = _profile("small_cnn")
    ranks = [RankSpec(), RankSpec(slowdown=2.0)]
    equal = predict_ranks(model, profile, ranks, idle(), link=FAST_LINK, shares=(32, 32))
    fair = predict_ranks(model, profile, ranks, idle(), link=FAST_LINK)
    assert sum(fair.shares) == 64 and fair.shares[0] > 40 > fair.shares[1]
    assert equal.step_s / fair.step_s > 1.3
    assert fair.step_s == pytest.approx(max(fair.compute_s) + fair.allreduce_s)
    assert fair.detail["rank_busy_cores"] == pytest.approx([1.0, 1.0], abs=0.1)  # the ranks are each other's load


def test_the_choice_follows_the_link(tmp_path: Path) -> None:
    model = this_machine_model(tmp_path)
    profile = _profile("small_cnn")
    slow = choose_ranks_or_single(model, profile, [RankSpec(), RankSpec()], idle(), link=Link(1e6, 1e-3, "test: 1 MB/s"))
    assert slow.chosen == "single" and "slower" in slow.reasoning[-1]
    assert slow.multi.allreduce_s == pytest.approx(ring_allreduce_s(slow.multi.gradient_bytes, 2, slow.multi.link))
    fast = choose_ranks_or_single(model, profile, [RankSpec(), RankSpec()], idle(), link=FAST_LINK)
    assert (fast.chosen == "multi") == (fast.multi.run_s < fast.single.predicted_s)
    assert fast.single.plan.backend == "cpu" and "best single process" in fast.reasoning[1]


def test_rank_prediction_refuses_what_it_cannot_predict(tmp_path: Path) -> None:
    model = this_machine_model(tmp_path)
    with pytest.raises(ValueError, match="slowdown"):
        predict_ranks(model, _profile("mlp"), [RankSpec(slowdown=0.0)], idle(), link=FAST_LINK)
    with pytest.raises(ValueError, match="summing"):
        predict_ranks(model, _profile("mlp"), [RankSpec(), RankSpec()], idle(), link=FAST_LINK, shares=(10, 10))


def test_a_split_plans_power_is_its_workers_power() -> None:
    from trainpilot.energy import PlanPower

    power = PlanPower.for_machine(logical_cpus=2)
    split, one = power.watts(TWO_CPU), power.watts(Plan("cpu", threads=1))
    assert split.watts == pytest.approx(2 * one.watts) and split.estimated
