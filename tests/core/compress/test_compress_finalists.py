"""The deployment controller's choice among the search's finalists: re-measured speed filters,
the deployment fine-tune and the VALIDATION split decide, the test split never does."""
from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch
from torch import nn

from trainpilot.compress import finalists as fin
from trainpilot.compress.cycles import StepTimes
from trainpilot.compress.evaluate import Evaluation
from trainpilot.compress.finetune import Tensors
from trainpilot.compress.grow import Grown
from trainpilot.compress.prune import PrunedModel
from trainpilot.compress.reward import Reward


def evaluation(kept: tuple[int, int], accuracy: float, speedup: float) -> Evaluation:
    return Evaluation(sparsity={"a": 1 - kept[0] / 16, "b": 1 - kept[1] / 32}, kept={"a": kept[0], "b": kept[1]}, accuracy=accuracy,
                      speedup=speedup, step_s=1.0, dense_step_s=speedup, cycles="measured", params=1,
                      reward=Reward(0.0, True, True), seconds=0.0)


class Tagged(nn.Module):
    def __init__(self, kept: tuple[int, ...]):
        super().__init__()
        self.kept = kept


@pytest.fixture
def world(monkeypatch):
    """A fake evaluator and figures keyed by channels kept: re-measured speed-up, validation
    accuracy and loss after the fine-tune. Records every split the choice reads."""
    val = Tensors(torch.zeros(4, 1), torch.zeros(4, dtype=torch.long))
    evaluator = SimpleNamespace(target=SimpleNamespace(is_described=False), val=val, threads=1, aim=1.05,
                                layers=SimpleNamespace(prunable=[SimpleNamespace(name="a", out_channels=16), SimpleNamespace(name="b", out_channels=32)]),
                                prune=lambda s: PrunedModel(Tagged((round(16 * (1 - s["a"])), round(32 * (1 - s["b"])))), s,
                                                            {"a": round(16 * (1 - s["a"])), "b": round(32 * (1 - s["b"]))}))
    figures: dict[tuple[int, ...], dict[str, float]] = {}
    read: list[object] = []
    tuned: list[tuple[int, ...]] = []

    def measure(_ev, pruned, _repeats):  # noiseless: every round alike, so each interval is its point
        seconds = {"dense": 1.0, **{str(i): 1.0 / figures[p.model.kept]["speedup"] for i, p in enumerate(pruned)}}
        return StepTimes("measured", seconds, 64, "here", 21, {k: (v,) * 21 for k, v in seconds.items()})

    def acc(model, data, *, threads):
        read.append(data)
        return figures[model.kept]["val"]

    def loss(model, data, *, threads):
        read.append(data)
        return figures[model.kept]["loss"]

    def tune(pruned):
        tuned.append(pruned.model.kept)
        return pruned

    monkeypatch.setattr(fin, "measure_finalists", measure)
    monkeypatch.setattr(fin, "grow", lambda _ev, start, **_k: Grown(start, None, 0))  # growth: test_compress_grow.py
    monkeypatch.setattr(fin, "accuracy", acc)
    monkeypatch.setattr(fin, "val_loss", loss)
    return SimpleNamespace(evaluator=evaluator, figures=figures, read=read, tuned=tuned, tune=tune, val=val)


def test_the_shortlist_is_distinct_fast_enough_and_most_accurate_first() -> None:
    evals = [evaluation((8, 16), 0.90, 1.70), evaluation((8, 16), 0.93, 1.60), evaluation((10, 20), 0.95, 1.52),
             evaluation((6, 12), 0.91, 2.00), evaluation((12, 24), 0.99, 1.20)]
    got = fin.shortlist(evals, 1.5, 5, 1.05)
    assert [tuple(e.kept.values()) for e in got] == [(8, 16), (6, 12)]  # 1.52 < 1.5 x the aim; 1.20 too slow
    assert got[0].accuracy == 0.93  # the configuration's best try
    assert len(fin.shortlist(evals, 1.5, 1, 1.05)) == 1
    assert [tuple(e.kept.values()) for e in fin.shortlist(evals, 1.5, 5, 1.0)][0] == (10, 20)  # no noise to aim past


def test_the_choice_is_made_on_validation_after_the_deployment_fine_tune(world) -> None:
    evals = [evaluation((8, 16), 0.95, 1.70), evaluation((7, 14), 0.94, 1.80), evaluation((6, 12), 0.93, 1.90),
             evaluation((5, 10), 0.92, 2.00)]
    world.figures.update({(8, 16): dict(speedup=1.40, val=0.99, loss=0.1),  # re-measured too slow: never fine-tuned
                          (7, 14): dict(speedup=1.70, val=0.90, loss=0.3),
                          (6, 12): dict(speedup=1.80, val=0.93, loss=0.4),
                          (5, 10): dict(speedup=1.90, val=0.92, loss=0.2)})
    chosen, finalists = fin.choose(evals, count=3, target_speedup=1.5, evaluator=world.evaluator, tune=world.tune, repeats=3)
    assert world.tuned == [(7, 14), (6, 12), (5, 10)]
    assert tuple(chosen.evaluation.kept.values()) == (5, 10)  # the lowest validation loss (not the search's accuracy)
    assert chosen.speedup == pytest.approx(1.90) and chosen.val_accuracy == 0.92
    assert [f.val_accuracy for f in finalists] == [None, 0.90, 0.93, 0.92]
    assert all(data is world.val for data in world.read)  # the test split is never an argument here


def test_count_limits_the_fine_tunes(world) -> None:
    evals = [evaluation((8, 16), 0.95, 1.70), evaluation((7, 14), 0.94, 1.80), evaluation((6, 12), 0.93, 1.90)]
    world.figures.update({k: dict(speedup=1.7, val=0.9, loss=0.1) for k in [(8, 16), (7, 14), (6, 12)]})
    chosen, _ = fin.choose(evals, count=1, target_speedup=1.5, evaluator=world.evaluator, tune=world.tune, repeats=3)
    assert world.tuned == [(8, 16)] and tuple(chosen.evaluation.kept.values()) == (8, 16)


def test_equal_losses_go_to_the_higher_validation_accuracy(world) -> None:
    evals = [evaluation((8, 16), 0.95, 1.70), evaluation((7, 14), 0.94, 1.80)]
    world.figures.update({(8, 16): dict(speedup=1.7, val=0.90, loss=0.2), (7, 14): dict(speedup=1.8, val=0.91, loss=0.2)})
    chosen, _ = fin.choose(evals, count=3, target_speedup=1.5, evaluator=world.evaluator, tune=world.tune, repeats=3)
    assert tuple(chosen.evaluation.kept.values()) == (7, 14)


def test_a_search_budget_left_fine_tunes_more_finalists(world) -> None:
    evals = [evaluation((k, 2 * k), 0.9 + k / 100, 1.7) for k in range(4, 9)]
    world.figures.update({(k, 2 * k): dict(speedup=1.7, val=0.9, loss=1.0 / k) for k in range(4, 9)})
    fin.choose(evals, count=2, target_speedup=1.5, evaluator=world.evaluator, tune=world.tune, repeats=3, budget_s=0.0)
    assert world.tuned == [(8, 16), (7, 14)]
    world.tuned.clear()
    chosen, _ = fin.choose(evals, count=2, target_speedup=1.5, evaluator=world.evaluator, tune=world.tune, repeats=3, budget_s=60.0)
    assert len(world.tuned) == 5 and tuple(chosen.evaluation.kept.values()) == (8, 16)


def test_when_none_stays_fast_enough_the_fastest_is_the_finalist(world) -> None:
    evals = [evaluation((8, 16), 0.95, 1.70), evaluation((7, 14), 0.94, 1.80)]
    world.figures.update({(8, 16): dict(speedup=1.30, val=0.99, loss=0.1), (7, 14): dict(speedup=1.45, val=0.90, loss=0.3)})
    chosen, _ = fin.choose(evals, count=3, target_speedup=1.5, evaluator=world.evaluator, tune=world.tune, repeats=3)
    assert world.tuned == [(7, 14)] and chosen.speedup == pytest.approx(1.45)


def test_nothing_fast_enough_in_the_search_leaves_the_choice_to_the_caller(world) -> None:
    chosen, finalists = fin.choose([evaluation((8, 16), 0.95, 1.2)], count=3, target_speedup=1.5, evaluator=world.evaluator,
                                   tune=world.tune, repeats=3)
    assert chosen is None and finalists == [] and world.tuned == []


def test_predicted_cycles_are_not_re_measured(world, monkeypatch) -> None:
    world.evaluator.target.is_described = True
    monkeypatch.setattr(fin, "measure_finalists", lambda *a: pytest.fail("a described target's cycles are predicted"))
    world.figures.update({(8, 16): dict(val=0.9, loss=0.1)})
    chosen, _ = fin.choose([evaluation((8, 16), 0.95, 1.7)], count=3, target_speedup=1.5, evaluator=world.evaluator,
                           tune=world.tune, repeats=3)
    assert chosen.speedup == pytest.approx(1.7)


def test_finalists_are_fine_tuned_as_grown_and_one_grown_configuration_once(world, monkeypatch) -> None:
    """Both finalists grow into 8/16 (the channels they left cost nothing): 8/16 is fine-tuned once,
    with its own confirmed speed-up, and the report keeps the search's configuration beside it."""
    evals = [evaluation((7, 14), 0.95, 1.80), evaluation((6, 12), 0.94, 1.90), evaluation((4, 8), 0.90, 2.40)]
    world.figures.update({(7, 14): dict(speedup=1.8), (6, 12): dict(speedup=1.9), (4, 8): dict(speedup=2.4),
                          (8, 16): dict(val=0.95, loss=0.1), (5, 10): dict(val=0.93, loss=0.2)})
    into = {(7, 14): (8, 16), (6, 12): (8, 16), (4, 8): (5, 10)}

    def grow(evaluator, start, *, threshold, aim):
        assert threshold == pytest.approx(1.5)  # the target itself: each growth step's interval carries the noise
        assert aim == evaluator.aim  # ... and its point keeps the search's margin past the noise
        k = into.get(start.model.kept)
        if k is None:  # the starts cut to the channel grid (7/8, 6/8) take nothing back here
            return Grown(start, None, 1)
        return Grown(PrunedModel(Tagged(k), {}, {"a": k[0], "b": k[1]}), 1.6, 5)

    monkeypatch.setattr(fin, "grow", grow)
    chosen, finalists = fin.choose(evals, count=3, target_speedup=1.5, evaluator=world.evaluator, tune=world.tune, repeats=3)
    assert world.tuned == [(8, 16), (5, 10)]
    assert chosen.kept == {"a": 8, "b": 16} and chosen.grown and chosen.speedup == pytest.approx(1.6)
    assert chosen.to_dict()["search_kept_channels"] == {"a": 7, "b": 14} and chosen.to_dict()["kept_channels"] == {"a": 8, "b": 16}
    assert finalists[1].val_loss is None  # 6/12 grew into 8/16 as well: not fine-tuned twice


def test_without_free_channels_nothing_grows(world, monkeypatch) -> None:
    monkeypatch.setattr(fin, "grow", lambda *a, **k: pytest.fail("--no-free-channels"))
    world.figures.update({(8, 16): dict(speedup=1.7, val=0.9, loss=0.1)})
    chosen, _ = fin.choose([evaluation((8, 16), 0.95, 1.7)], count=3, target_speedup=1.5, evaluator=world.evaluator,
                           tune=world.tune, repeats=3, free_channels=False)
    assert not chosen.grown


def test_a_configuration_cut_to_the_channel_grid_that_grows_into_more_is_a_finalist_of_its_own(world, monkeypatch) -> None:
    """9/13 holds time it does not use (9 channels cost a block of 16): cut to 8/8 it grows into
    8/24 at the same target. Both are fine-tuned; validation picks 8/24."""
    world.figures.update({(9, 13): dict(speedup=1.60, val=0.90, loss=0.3), (8, 24): dict(val=0.93, loss=0.2)})
    seen: list[tuple[int, ...]] = []

    def grow(evaluator, start, *, threshold, aim):
        seen.append(start.model.kept)
        if start.model.kept == (8, 8):
            return Grown(PrunedModel(Tagged((8, 24)), {}, {"a": 8, "b": 24}), 1.62, 4)
        return Grown(start, None, 4)

    monkeypatch.setattr(fin, "grow", grow)
    chosen, finalists = fin.choose([evaluation((9, 13), 0.95, 1.7)], count=1, target_speedup=1.5, evaluator=world.evaluator,
                                   tune=world.tune, repeats=3)
    assert seen == [(9, 13), (8, 8)] and world.tuned == [(9, 13), (8, 24)]
    assert chosen.kept == {"a": 8, "b": 24} and chosen.speedup == pytest.approx(1.62)
    assert [f.kept for f in finalists] == [{"a": 9, "b": 13}, {"a": 8, "b": 24}]
    assert chosen.to_dict()["search_kept_channels"] == {"a": 9, "b": 13}


def test_a_described_target_grows_no_second_start(world, monkeypatch) -> None:
    world.evaluator.target.is_described = True
    seen: list[tuple[int, ...]] = []
    monkeypatch.setattr(fin, "grow", lambda _ev, start, **_k: (seen.append(start.model.kept), Grown(start, None, 0))[1])
    world.figures.update({(9, 13): dict(val=0.9, loss=0.1)})
    fin.choose([evaluation((9, 13), 0.95, 1.7)], count=3, target_speedup=1.5, evaluator=world.evaluator, tune=world.tune, repeats=3)
    assert seen == [(9, 13)]


def baseline(kind: str, kept: tuple[int, int], speedup: float) -> fin.Finalist:
    model = Tagged(kept)
    return fin.Finalist(None, speedup, pruned=PrunedModel(model, {}, {"a": kept[0], "b": kept[1]}), kind=kind)


def test_baselines_at_the_target_speed_are_fine_tuned_and_can_win(world) -> None:
    evals = [evaluation((7, 14), 0.94, 1.80), evaluation((5, 10), 0.92, 2.00)]
    world.figures.update({(7, 14): dict(speedup=1.70, val=0.90, loss=0.3), (5, 10): dict(speedup=2.0, val=0.91, loss=0.25),
                          (8, 16): dict(val=0.93, loss=0.2), (6, 20): dict(val=0.92, loss=0.22)})
    chosen, finalists = fin.choose(evals, count=3, target_speedup=1.5, evaluator=world.evaluator, tune=world.tune, repeats=3,
                                   baselines=[baseline("uniform", (8, 16), 1.6), baseline("l1-global", (6, 20), 1.6)])
    assert world.tuned == [(7, 14), (5, 10), (8, 16), (6, 20)]  # the same fine-tune for every finalist
    assert chosen.kind == "uniform" and chosen.evaluation is None and chosen.kept == {"a": 8, "b": 16}
    assert [f.kind for f in finalists] == ["agent", "agent", "uniform", "l1-global"]
    assert finalists[2].to_dict()["search_kept_channels"] is None and finalists[2].to_dict()["kind"] == "uniform"


def test_a_baseline_the_search_found_too_is_fine_tuned_once(world) -> None:
    world.figures.update({(8, 16): dict(speedup=1.70, val=0.93, loss=0.2)})
    chosen, finalists = fin.choose([evaluation((8, 16), 0.95, 1.80)], count=3, target_speedup=1.5, evaluator=world.evaluator,
                                   tune=world.tune, repeats=3, baselines=[baseline("uniform", (8, 16), 1.6)])
    assert world.tuned == [(8, 16)] and chosen.kind == "agent" and [f.kind for f in finalists] == ["agent"]


def test_with_nothing_fast_enough_in_the_search_the_baselines_are_compared(world) -> None:
    world.figures.update({(8, 16): dict(val=0.93, loss=0.2), (6, 20): dict(val=0.92, loss=0.1)})
    chosen, finalists = fin.choose([evaluation((12, 24), 0.95, 1.2)], count=3, target_speedup=1.5, evaluator=world.evaluator,
                                   tune=world.tune, repeats=3,
                                   baselines=[baseline("uniform", (8, 16), 1.6), baseline("l1-global", (6, 20), 1.6)])
    assert chosen.kind == "l1-global" and [f.kind for f in finalists] == ["uniform", "l1-global"]


def test_a_search_finalist_kept_only_as_the_fastest_does_not_beat_a_baseline_at_the_target(world) -> None:
    world.figures.update({(12, 24): dict(speedup=1.2, val=0.97, loss=0.05), (4, 4): dict(val=0.93, loss=0.2)})
    chosen, finalists = fin.choose([evaluation((12, 24), 0.95, 1.6)], count=3, target_speedup=1.5, evaluator=world.evaluator,
                                   tune=world.tune, repeats=3, baselines=[baseline("l1-global", (4, 4), 1.6)])
    assert world.tuned == [(12, 24), (4, 4)] and chosen.kind == "l1-global"  # 12/24 re-measured at 1.2x: too slow
