"""The gradient hook of a rank (distributed/trainer.gradient_hook): the clock the ranks re-split
by (StepClock: a rank's compute from its forward's start to its gradients being ready) and the
step's figures riding on the gradient all-reduce (StepFigures)."""
from __future__ import annotations

import time

import pytest
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from trainpilot.parallel.step_clock import StepClock, StepFigures, gradient_hook

BACKWARD_S = 0.03


class SlowBackward(torch.autograd.Function):
    """Identity forward; a backward that takes BACKWARD_S (the part of a step a preempted rank
    loses on a shared core is mostly the backward, twice the forward's length)."""

    @staticmethod
    def forward(ctx, x):  # type: ignore[no-untyped-def]
        return x.clone()

    @staticmethod
    def backward(ctx, grad):  # type: ignore[no-untyped-def]
        time.sleep(BACKWARD_S)
        return grad


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(8, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return SlowBackward.apply(self.linear(x))  # its backward runs before the weights' gradients


@pytest.fixture
def one_rank_group(tmp_path):
    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'pg'}", rank=0, world_size=1)
    yield
    dist.destroy_process_group()


def test_the_clock_counts_the_backward_up_to_the_gradients_and_only_timed_steps(one_rank_group):
    model = Model()
    ddp = DistributedDataParallel(model)
    clock = StepClock()
    clock.attach(model)
    ddp.register_comm_hook(None, gradient_hook(clock, StepFigures()))
    x = torch.randn(16, 8, requires_grad=True)

    ddp(x).sum().backward()  # not inside timing(): an evaluation or a short batch, never counted
    assert clock.per_sample_s == []

    for _ in range(3):
        with clock.timing(16):
            ddp(x).sum().backward()
    assert len(clock.per_sample_s) == 3
    # the forward alone is microseconds; the figure holds the slow backward (a forward-only clock
    # read ~0 here and called a preempted rank as fast as a free one)
    assert min(clock.per_sample_s) * 16 >= BACKWARD_S * 0.9, clock.per_sample_s
    # DDP's average still happened: the hook hands the bucket to DDP's own all-reduce
    assert model.linear.weight.grad is not None and torch.isfinite(model.linear.weight.grad).all()


def test_the_figures_ride_on_the_gradient_all_reduce_and_the_gradients_stay_ddp_s(one_rank_group):
    torch.manual_seed(0)
    plain, hooked = Model(), Model()
    hooked.load_state_dict(plain.state_dict())
    x = torch.randn(16, 8)
    DistributedDataParallel(plain)(x).sum().backward()  # DDP's own average, no hook

    ddp = DistributedDataParallel(hooked)
    figures = StepFigures()
    ddp.register_comm_hook(None, gradient_hook(StepClock(), figures))
    figures.put([123.25, 7.0, 16.0, 1.0])
    ddp(x).sum().backward()
    assert figures.summed == [123.25, 7.0, 16.0, 1.0]  # summed over the one rank, not averaged
    assert figures.take() is None  # taken by the last bucket: nothing rides twice
    for a, b in zip(plain.parameters(), hooked.parameters()):
        assert torch.equal(a.grad, b.grad)

    ddp(x).sum().backward()  # a step that put no figures: the hook is DDP's plain average
    for a, b in zip(plain.parameters(), hooked.parameters()):
        assert torch.allclose(2 * a.grad, b.grad)  # accumulated, as without the hook


def test_the_shares_come_from_the_last_few_epochs_steps():
    clock = StepClock()
    for epoch in range(StepClock.WINDOW_EPOCHS + 1):
        clock.per_sample_s = [float(epoch)] * 2
        window = clock.close_epoch()
    # the oldest epoch (0) has left the window; the newest ones are all in it
    assert sorted(set(window)) == [float(e) for e in range(1, StepClock.WINDOW_EPOCHS + 1)]
    assert len(window) == 2 * StepClock.WINDOW_EPOCHS and clock.per_sample_s == []
    assert clock.close_epoch() == window  # an epoch that timed nothing keeps what was there
