"""The closed loop's rules on constructed figures: when a move pays (replan.py), how a near-tie
trial decides (near_tie.py), and how the watch cuts windows (watch.py)."""
from __future__ import annotations

import math
import random

import pytest

from trainpilot.plans import Plan
from trainpilot.run.near_tie import MIN_PAIRS, Trial, TrialPlan, default_distance, trial_plan
from trainpilot.run.replan import MARGIN, Option, clamp_bias, rethink
from trainpilot.run.watch import Watch

ONE, TWO = Plan("cpu", threads=1), Plan("cpu", threads=2)


# ---------------------------------------------------------------- replan


def test_a_move_that_saves_more_than_the_margin_is_made():
    decision = rethink(TWO, current_step_s=0.030, remaining_steps=1000, options=[Option(ONE, 0.012, 0.02)])
    assert decision.moves and decision.best.plan == ONE
    assert decision.factor == pytest.approx(2.5)
    assert "2.5x faster" in decision.text() and "moving costs" in decision.text()


def test_a_saving_inside_the_margin_keeps_the_plan():
    step = 0.020
    inside = step * (1 - MARGIN / 2)
    decision = rethink(TWO, step, 1000, [Option(ONE, inside, 0.0)])
    assert not decision.moves
    assert "inside the 15% margin" in decision.text()


def test_the_cost_of_moving_counts_against_a_short_remainder():
    # 3x faster per step, but only 10 steps left and a 1 s move: staying is cheaper
    decision = rethink(TWO, 0.030, 10, [Option(ONE, 0.010, 1.0)])
    assert not decision.moves


def test_the_rule_is_symmetric_so_the_run_moves_back():
    loaded = rethink(TWO, 0.060, 500, [Option(ONE, 0.020, 0.01)])
    idle = rethink(ONE, 0.020, 500, [Option(TWO, 0.010, 0.01)])
    assert loaded.moves and loaded.best.plan == ONE
    assert idle.moves and idle.best.plan == TWO


def test_no_other_plan_is_said_plainly():
    decision = rethink(TWO, 0.02, 100, [])
    assert not decision.moves and "no other plan" in decision.text()


def test_bias_is_measured_over_predicted_within_limits():
    assert clamp_bias(0.011, 0.010) == pytest.approx(1.1)
    assert clamp_bias(0.1, 0.01) == 2.0 and clamp_bias(0.001, 0.01) == 0.5
    assert clamp_bias(0.01, None) == 1.0


# ---------------------------------------------------------------- near ties


def run_trial(spec: TrialPlan, step_of, seed: int = 0):
    """Drive a trial with step times drawn by `step_of(plan, rng)` until it answers."""
    rng = random.Random(seed)
    trial = Trial(spec)
    for _ in range(10_000):
        plan = trial.plan_now()
        if trial.stepped(step_of(plan, rng)):
            verdict = trial.verdict()
            if verdict is not None:
                return trial, verdict
    raise AssertionError("the trial never answered")


def test_the_trial_alternates_abba_and_skips_each_blocks_first_step():
    trial = Trial(TrialPlan(TWO, ONE, block_steps=2, pairs=4, budget_s=1.0))
    order = []
    for _ in range(4):
        order.append(trial.plan_now())
        for _ in range(3):  # one warm-up step, then the block's two
            done = trial.stepped(1.0 if trial.plan_now() == TWO else 2.0)
        assert done
    assert order == [TWO, ONE, ONE, TWO]
    assert [m for _p, m in trial.blocks] == [1.0, 2.0, 2.0, 1.0]


def test_a_real_difference_is_decided_early_for_the_faster_plan():
    spec = TrialPlan(TWO, ONE, block_steps=5, pairs=12, budget_s=5.0)
    trial, verdict = run_trial(spec, lambda p, r: (0.010 if p == ONE else 0.013) * r.uniform(0.95, 1.05))
    assert verdict.decided and verdict.keep(2) == ONE
    assert verdict.pairs < 12  # decided before the budget ran out
    assert verdict.ratio == pytest.approx(0.010 / 0.013, rel=0.05)
    assert "keeping cpu×1, measured faster" in verdict.text(2)


def test_a_tie_the_noise_cannot_split_keeps_pytorchs_default():
    spec = TrialPlan(ONE, TWO, block_steps=4, pairs=MIN_PAIRS + 2, budget_s=1.0)
    _trial, verdict = run_trial(spec, lambda p, r: 0.010 * r.uniform(0.8, 1.2), seed=3)
    assert not verdict.decided
    assert verdict.keep(default_threads=2) == TWO  # all threads, NCHW, fp32: PyTorch's own way
    assert "closer to PyTorch's default" in verdict.text(2)


def test_a_slow_first_step_after_each_move_does_not_decide_it():
    # the second plan's first step of every block is 10x slow (a warm-up): skipped, so a tie stays a tie
    def step(plan, rng):
        return 0.010 * rng.uniform(0.97, 1.03)

    spec = TrialPlan(TWO, ONE, block_steps=4, pairs=MIN_PAIRS, budget_s=1.0)
    trial = Trial(spec)
    rng = random.Random(1)
    verdict = None
    while verdict is None:
        first = trial._seen == 0
        slow = 0.1 if first and trial.plan_now() == ONE else None
        if trial.stepped(slow or step(trial.plan_now(), rng)):
            verdict = trial.verdict()
    assert not verdict.decided


def test_the_trial_is_sized_from_the_budget_and_refuses_a_short_run():
    spec = trial_plan(TWO, ONE, step_s=0.01, remaining_s=60.0)
    assert spec.block_steps == 15 and spec.affordable
    assert spec.pairs == min(12, int(0.05 * 60 // (16 * 0.01)))
    short = trial_plan(TWO, ONE, step_s=0.01, remaining_s=2.0)
    assert not short.affordable


def test_default_distance_counts_each_setting_changed_from_pytorchs_way():
    assert default_distance(TWO, 2) == 0
    assert default_distance(ONE, 2) == 1
    assert default_distance(Plan("cpu", threads=1, memory_format="channels_last", loader_workers=2), 2) == 3
    assert default_distance(Plan("cuda", device="cuda:0"), 2) > default_distance(ONE, 2)


# ---------------------------------------------------------------- the watch


class FakeMeter:
    """A load meter reading a scripted number of other-process cores (tests only)."""

    reading = 0.0

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.result = type("R", (), {"cores": FakeMeter.reading + 0.1, "ui_cores": 0.1})()


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def test_the_watch_closes_a_window_only_when_it_is_long_enough():
    clock = Clock()
    watch = Watch(meter=FakeMeter, clock=clock, window_s=0.5)
    watch.start()
    for _ in range(3):
        clock.now += 0.1
        watch.stepped(0.1)
    assert watch.boundary() is None
    FakeMeter.reading = 1.0
    clock.now += 0.3
    watch.stepped(0.3)
    window = watch.boundary()
    assert window is not None and window.steps == 4
    assert window.step_s == pytest.approx(0.1) and window.others == pytest.approx(1.0) and window.ui == pytest.approx(0.1)
    assert watch.boundary() is None  # a new window opened


def test_after_a_move_the_old_plans_steps_and_the_warm_up_step_are_dropped():
    clock = Clock()
    watch = Watch(meter=FakeMeter, clock=clock, window_s=0.5)
    watch.start()
    watch.stepped(0.5)
    watch.moved()
    watch.stepped(9.0)  # the new plan's first step
    watch.stepped(0.2)
    clock.now = 1.0
    window = watch.boundary()
    assert window.steps == 1 and window.step_s == pytest.approx(0.2)
    assert math.isfinite(window.wall_s)
