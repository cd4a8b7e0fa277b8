"""The baselines the agent is compared with: matched to the agent's model by measured step time,
the two timed side by side (not to a speed-up number measured earlier against the dense model)."""
from __future__ import annotations

import pytest
import torch

from trainpilot.compress import baselines, evaluate
from trainpilot.compress.cycles import MEASURED, StepTimes


def _params(model) -> int:
    return sum(p.numel() for p in model.parameters())


@pytest.fixture
def cost_is_params(monkeypatch):
    """A noiseless stand-in for the measurement: a model's step time is its parameter count, and
    the models it was asked to time side by side are recorded."""
    timed: list[list[str]] = []

    def fake_measure(models, *_a, batch, **_k):
        timed.append(list(models))
        return StepTimes(MEASURED, {k: float(_params(m)) for k, m in models.items()}, batch, "test")

    monkeypatch.setattr(evaluate, "measure_steps", fake_measure)  # the evaluator's timing (Evaluator.timed_here)
    return timed


@pytest.mark.parametrize("kind", ["uniform", "l1-global"])
def test_match_finds_the_least_pruning_as_fast_as_the_reference(evaluator, cost_is_params, kind):
    reference = baselines.pruned_by("uniform", evaluator, 0.4).model
    model, matched = baselines.match_speedup(kind, evaluator, reference, repeats=3)
    assert matched.name == kind
    assert matched.vs_agent >= 1.0 and _params(model.model) <= _params(reference)
    # the smallest such ratio, to the bisection's resolution: a little less pruning is slower
    assert _params(baselines.pruned_by(kind, evaluator, max(0.0, matched.ratio - 0.06)).model) > _params(reference)
    # every measurement put the candidate next to the reference, never next to a number from before
    assert cost_is_params and all(names == ["reference", "candidate"] for names in cost_is_params)


def test_match_against_an_unreachable_reference_gives_the_most_pruning(evaluator, cost_is_params):
    tiny = torch.nn.Linear(1, 1)  # fewer parameters (a faster step) than any pruning allowed reaches
    model, matched = baselines.match_speedup("uniform", evaluator, tiny, repeats=3)
    assert matched.ratio == baselines.MAX_SPARSITY and matched.vs_agent < 1.0


def test_match_on_real_timing_lands_near_the_reference(evaluator):
    """Measured for real (median of interleaved steps): the ratio found for the same kind of
    pruning as the reference's is close to the reference's own."""
    reference = baselines.pruned_by("uniform", evaluator, 0.5).model
    _model, matched = baselines.match_speedup("uniform", evaluator, reference, repeats=9)
    assert 0.2 <= matched.ratio <= 0.8
