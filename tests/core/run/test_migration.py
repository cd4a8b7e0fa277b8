"""A plan switch moves weights and optimizer state and changes nothing else: training that migrates
mid-epoch ends with exactly the weights of training that never moved (CPU path here; the CUDA
round trip runs where a GPU exists)."""
from __future__ import annotations

import pytest
import torch

from trainpilot.job.data import demo_dataset, validate
from trainpilot.plans import Plan
from trainpilot.job.prepare import seed_everything
from trainpilot.run.trainer import Trainer
from trainpilot.job.models import build_model


@pytest.fixture(scope="module")
def data():
    full = demo_dataset(n=256)
    return validate(full.X, full.y, "demo").split(0.25, seed=0)


def _trainer(data) -> Trainer:
    seed_everything(0)
    model = build_model("small_cnn", (1, 28, 28), 10)
    return Trainer(model, data[0], data[1], batch_size=32, lr=1e-3, seed=0)


def _weights(trainer: Trainer) -> dict[str, torch.Tensor]:
    return {k: v.detach().cpu().clone() for k, v in trainer.full_model.state_dict().items()}


def _train(trainer: Trainer, schedule: dict[int, Plan], steps: int = 6) -> None:
    """Train `steps` steps, switching to schedule[step] before that step."""
    for step in range(steps):
        if step in schedule:
            trainer.use_plan(schedule[step])
        trainer.train_step(0, step)


def test_switching_plans_mid_epoch_keeps_weights_and_optimizer_state(data):
    straight, moved = _trainer(data), _trainer(data)
    _train(straight, {0: Plan("cpu", threads=1)})
    _train(moved, {0: Plan("cpu", threads=1), 3: Plan("cpu", threads=1)})
    a, b = _weights(straight), _weights(moved)
    assert all(torch.equal(a[k], b[k]) for k in a)
    exp_avg = [s["exp_avg"] for s in moved.optimizer.state.values()]
    assert exp_avg and all(t.abs().sum() > 0 for t in exp_avg)  # Adam's moments survived the move


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_round_trip_keeps_training_state(data):
    straight, moved = _trainer(data), _trainer(data)
    _train(straight, {0: Plan("cpu", threads=1)})
    _train(moved, {0: Plan("cpu", threads=1), 2: Plan("cuda", device="cuda:0"), 4: Plan("cpu", threads=1)})
    a, b = _weights(straight), _weights(moved)
    assert all(torch.allclose(a[k], b[k], atol=1e-5) for k in a)
    assert all(t.device.type == "cpu" for s in moved.optimizer.state.values() for t in s.values() if isinstance(t, torch.Tensor))
