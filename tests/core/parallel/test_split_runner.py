"""The split step: several workers on shares of one batch give the single-device step on the whole
batch (gradients and weights after the optimizer step), and models it cannot split are refused."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from trainpilot.job.data import Dataset
from trainpilot.errors import BackendUnavailable
from trainpilot.job.objective import Objective
from trainpilot.parallel.split_runner import SplitRunner, WorkerModel
from trainpilot.plans import Plan
from trainpilot.run.trainer import Trainer
from trainpilot.job.models import ModelSpec, build_model

TWO_CPU = Plan.split([Plan("cpu", threads=1), Plan("cpu", threads=1)])


def _data(n: int = 96, seed: int = 0) -> Dataset:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 1, 28, 28)).astype(np.float32)
    y = rng.integers(0, 10, size=n).astype(np.int64)
    return Dataset(X, y, num_classes=10, source="arrays")


def _trainer(model_name: str, plan: Plan, batch: int = 32) -> Trainer:
    torch.manual_seed(0)
    data = _data()
    model = build_model(ModelSpec.from_config(model_name), (1, 28, 28), 10)
    trainer = Trainer(model, data, _data(8, seed=1), batch_size=batch, lr=1e-2, seed=0)
    trainer.use_plan(plan)
    return trainer


@pytest.mark.parametrize("model_name", ["small_cnn", "mlp"])
def test_split_steps_equal_single_device_steps(model_name: str) -> None:
    single, split = _trainer(model_name, Plan("cpu", threads=1)), _trainer(model_name, TWO_CPU)
    split._runner.steps = 1  # time the first step too, so the shares change within three steps
    for step in range(3):  # 96 samples / 32
        a, b = single.train_step(0, step), split.train_step(0, step)
        assert b.loss == pytest.approx(a.loss, rel=1e-5) and b.correct == a.correct and b.seen == a.seen
        for (name, p), q in zip(single.full_model.named_parameters(), split.full_model.parameters()):
            # the gradients agree to float error (~1e-8 here); Adam divides by sqrt(v), so a weight whose
            # gradient is ~0 can move by a few 1e-6 differently: still far below one step's lr (1e-2)
            torch.testing.assert_close(q.grad, p.grad, rtol=1e-4, atol=1e-6, msg=name)
            torch.testing.assert_close(q, p, rtol=0, atol=1e-5, msg=name)
    assert sum(split._runner.last_shares) == 32 and split._runner.steps == 4
    split._runner.close()


def test_combined_gradient_is_the_whole_batch_gradient_for_uneven_shares() -> None:
    torch.manual_seed(1)
    model = nn.Sequential(nn.Flatten(), nn.Linear(784, 16), nn.ReLU(), nn.Linear(16, 10))
    x, y = torch.randn(13, 1, 28, 28), torch.randint(0, 10, (13,))
    loss_fn = nn.CrossEntropyLoss()
    loss_fn(model(x), y).backward()
    expected = [p.grad.clone() for p in model.parameters()]
    model.zero_grad(set_to_none=True)
    runner = SplitRunner(model, TWO_CPU)
    runner.steps = 1  # past the untimed warm-up step
    for n in (2, 4, 6):
        runner.models[0].add(n, 1.0 * n)
        runner.models[1].add(n, 3.0 * n)  # the second worker 3x slower per sample: shares ~10 + 3
    loss, logits, target = runner.forward_backward(model, Objective(loss_fn, None, None, "ce", None), (x, y))
    runner.close()
    assert runner.last_shares == (10, 3)
    assert logits.shape == (13, 10) and torch.equal(target, y)
    assert float(loss.detach()) == pytest.approx(float(loss_fn(model(x), y).detach()), rel=1e-6)
    for p, g in zip(model.parameters(), expected):
        torch.testing.assert_close(p.grad, g, rtol=1e-5, atol=1e-7)


def _uneven_runner(model: nn.Module) -> SplitRunner:
    runner = SplitRunner(model, TWO_CPU)
    runner.steps = 1  # past the untimed warm-up step
    for n in (2, 4, 6):
        runner.models[0].add(n, 1.0 * n)
        runner.models[1].add(n, 3.0 * n)
    return runner


@pytest.mark.parametrize("reduction", ["mean", "sum"])
def test_a_jobs_own_step_on_a_dict_batch_splits_to_the_whole_batch_gradient(reduction: str) -> None:
    """A step-form job (the loss computed inside, from a dict batch) and a summed loss: the shares'
    gradients, weighted by the declared reduction, are the whole batch's."""
    torch.manual_seed(2)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1))
    batch = {"features": torch.randn(13, 8), "target": torch.randn(13, 1)}
    reduce = torch.sum if reduction == "sum" else torch.mean

    def step(net: nn.Module, b: dict) -> torch.Tensor:
        return reduce((net(b["features"]) - b["target"]) ** 2)

    step(model, batch).backward()
    expected = [p.grad.clone() for p in model.parameters()]
    model.zero_grad(set_to_none=True)
    runner = _uneven_runner(model)
    loss, output, target = runner.forward_backward(model, Objective(None, step, None, "step", None), batch, reduction)
    runner.close()
    assert runner.last_shares == (10, 3) and output is None and target is None
    assert float(loss) == pytest.approx(float(step(model, batch).detach()), rel=1e-5)
    for p, g in zip(model.parameters(), expected):
        torch.testing.assert_close(p.grad, g, rtol=1e-5, atol=1e-6)


def test_a_batch_not_cut_along_its_samples_is_refused_with_the_reason() -> None:
    model = nn.Linear(8, 2)
    runner = _uneven_runner(model)
    batch = (torch.randn(13, 8), torch.randint(0, 2, (13,)), torch.randn(4))  # a per-batch tensor of another length
    with pytest.raises(BackendUnavailable, match="shape \\(4,\\) in a batch of 13 samples"):
        runner.forward_backward(model, Objective(lambda o, t: o.sum(), None, None, "x", None), batch)
    runner.close()


def test_batch_dependent_layers_are_refused() -> None:
    model = nn.Sequential(nn.Conv2d(1, 4, 3), nn.BatchNorm2d(4), nn.Flatten(), nn.Dropout(0.1), nn.LazyLinear(10))
    with pytest.raises(BackendUnavailable, match="BatchNorm2d"):
        SplitRunner(model, TWO_CPU)


def test_worker_model_fits_fixed_and_per_sample_cost() -> None:
    m = WorkerModel()
    m.add(16, 0.02)
    m.add(16, 0.02)
    m.add(16, 0.02)
    assert m.fit() is None  # no spread in the shares yet
    for n in (32, 48):
        m.add(n, 0.004 + n * 0.001)
    fixed, per_sample = m.fit()
    assert fixed == pytest.approx(0.004) and per_sample == pytest.approx(0.001)
    flat = WorkerModel()
    for n in (8, 16, 24):
        flat.add(n, 0.01)
    assert flat.fit() is None  # all overhead: no speed to split by


def test_a_job_with_dropout_is_not_offered_the_split_with_the_reason() -> None:
    # the profile carries the batch-dependent layers, so the plan is refused before it is offered,
    # not when the run moves onto it
    from trainpilot.job.workload import profile_model
    from trainpilot.parallel.split_backend import SplitBackend

    model = nn.Sequential(nn.Flatten(), nn.Linear(784, 32), nn.ReLU(), nn.Dropout(0.2), nn.Linear(32, 10))
    profile = profile_model(model, (1, 28, 28), 10, 96, batch_size=32)
    verdict = SplitBackend().supports_plan(profile, TWO_CPU)
    assert not verdict and "Dropout" in verdict.reason
    plain = profile_model(nn.Sequential(nn.Flatten(), nn.Linear(784, 10)), (1, 28, 28), 10, 96, batch_size=32)
    assert SplitBackend().supports(plain)
