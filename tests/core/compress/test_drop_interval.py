"""The accuracy drop's paired interval, the test split's resolution and the deployment rules that
read them: on constructed predictions whose discordant pairs are known."""
from __future__ import annotations

import pytest
import torch

from trainpilot.compress.deploy import judge
from trainpilot.compress.drop_interval import drop_interval, paired_drop, resolution
from trainpilot.compress.speedup_interval import speedup_interval


def predictions(lost: int, gained: int, both_right: int, both_wrong: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-sample correctness of a dense and a pruned model with exactly these discordant pairs, shuffled."""
    dense = [True] * lost + [False] * gained + [True] * both_right + [False] * both_wrong
    pruned = [False] * lost + [True] * gained + [True] * both_right + [False] * both_wrong
    order = torch.randperm(len(dense), generator=torch.Generator().manual_seed(0))
    return torch.tensor(dense)[order], torch.tensor(pruned)[order]


def test_six_lost_and_two_gained_of_270() -> None:
    drop = paired_drop(*predictions(lost=6, gained=2, both_right=254, both_wrong=8))
    assert (drop.lost, drop.gained, drop.samples) == (6, 2, 270)
    assert drop.drop == pytest.approx(100 * 4 / 270)  # what the deployment rule compares: 1.48 points
    # Bonett-Price by hand: (7 - 3) / 272 = 1.4706 % +- 1.96 * sqrt((10/272 - (4/272)^2) / 272) = 2.2720 %
    assert (drop.low, drop.high) == (pytest.approx(-0.8014, abs=1e-4), pytest.approx(3.7425, abs=1e-4))
    assert "1.48 points (95% interval -0.80 to 3.74; 6 lost, 2 gained of 270)" == drop.text()


def test_the_samples_both_models_agree_on_do_not_move_the_drop() -> None:
    few = paired_drop(*predictions(lost=5, gained=1, both_right=100, both_wrong=0))
    many_wrong = paired_drop(*predictions(lost=5, gained=1, both_right=50, both_wrong=50))
    assert (few.drop, few.low, few.high) == (many_wrong.drop, many_wrong.low, many_wrong.high)


def test_no_changed_prediction_is_no_proof_of_no_drop() -> None:
    drop = paired_drop(*predictions(lost=0, gained=0, both_right=260, both_wrong=10))
    assert drop.drop == 0.0 and drop.low == pytest.approx(-drop.high) and drop.high > 0.5


def test_the_interval_covers_the_true_drop_about_as_often_as_it_says() -> None:
    gen = torch.Generator().manual_seed(1)
    p_lost, p_gained, n, trials = 0.03, 0.01, 270, 2000
    cells = torch.multinomial(torch.tensor([p_lost, p_gained, 1 - p_lost - p_gained]), n * trials, replacement=True, generator=gen)
    cells = cells.view(trials, n)
    covered = 0
    for row in cells:
        d = drop_interval(int((row == 0).sum()), int((row == 1).sum()), n)
        covered += d.low <= 100 * (p_lost - p_gained) <= d.high
    assert 0.93 <= covered / trials <= 0.975


def test_more_test_samples_narrow_it() -> None:
    assert drop_interval(24, 8, 1080).half_width < drop_interval(6, 2, 270).half_width


def test_how_sure_the_drop_is_within_a_limit() -> None:
    drop = drop_interval(6, 2, 270)
    assert 0.5 < drop.within(2.0) < drop.within(3.0) < drop.within(drop.high) == pytest.approx(0.975, abs=1e-3)


def test_impossible_counts_are_refused() -> None:
    with pytest.raises(ValueError, match="impossible"):
        drop_interval(5, 6, 10)
    with pytest.raises(ValueError, match="same samples"):
        paired_drop(torch.ones(4, dtype=torch.bool), torch.ones(5, dtype=torch.bool))


def test_180_test_samples_do_not_resolve_a_2_point_drop() -> None:
    small = resolution(180, 2.0)
    assert small is not None and not small.resolved and small.half_width > 2.0
    assert 180 < small.samples_needed < 400 and resolution(small.samples_needed, 2.0).resolved
    text = small.warning()
    assert "on 180 test samples" in text and f"about {small.samples_needed} would resolve it" in text and "going on" in text
    assert resolution(720, 1.0).resolved and not resolution(360, 1.0).resolved
    assert resolution(270, 0.0) is None  # one lost sample is over a 0-point limit: nothing to resolve


def steady(ratio: float):
    """A speed-up timed in 21 rounds that all gave `ratio`: its interval is the point."""
    return speedup_interval([1.0] * 21, [1.0 / ratio] * 21)


def test_the_point_rule_deploys_within_the_limit_and_says_how_sure() -> None:
    drop = drop_interval(6, 2, 270)  # 1.48 points, up to 3.74
    verdict = judge(drop, steady(1.4), max_drop=2.0, target_speedup=1.3)
    assert verdict.deployed and verdict.interval is drop and verdict.rule == "point"
    assert "95% interval -0.80 to 3.74: 68% sure it is within the limit" in verdict.reason
    confident = judge(drop, steady(1.4), max_drop=2.0, target_speedup=1.3, rule="confident")
    assert not confident.deployed and "reaches above the allowed 2 points (--deploy-rule confident" in confident.reason
    assert judge(drop, steady(1.4), max_drop=4.0, target_speedup=1.3, rule="confident").deployed


def test_a_drop_over_the_limit_or_a_slow_model_is_refused_by_either_rule() -> None:
    drop = drop_interval(8, 0, 270)  # 2.96 points
    for rule in ("point", "confident"):
        verdict = judge(drop, steady(1.2), max_drop=2.0, target_speedup=1.3, rule=rule)
        assert not verdict.deployed and "accuracy drops 2.96 points (allowed 2; 95% interval" in verdict.reason
        assert "speed-up 1.20x (95% interval 1.20 to 1.20x over 21 rounds; 0% sure it clears 1.3x) is below the target 1.3x" in verdict.reason
    with pytest.raises(ValueError, match="unknown deployment rule"):
        judge(drop, steady(1.4), max_drop=2.0, target_speedup=1.3, rule="hopeful")
