"""A user's own job for the rank tests: a map-style Dataset, a loss of its own, SGD with momentum and
a step LR schedule, on a small MLP (no batch-coupled layers). `make_job_sum` declares a summed loss."""
from __future__ import annotations

import torch
from torch import nn
from torch.utils.data import Dataset

import trainpilot


class Blobs(Dataset):
    """Four Gaussian blobs in 16 dimensions, drawn from a fixed seed: every rank builds the same set."""

    def __init__(self, n: int = 600):
        g = torch.Generator().manual_seed(11)
        self.y = torch.randint(0, 4, (n,), generator=g)
        centers = torch.randn(4, 16, generator=g) * 2.0
        self.x = centers[self.y] + torch.randn(n, 16, generator=g)

    def __len__(self) -> int:
        return len(self.y)

    def __getitem__(self, i: int):
        return self.x[i], self.y[i]


def smoothed_ce(output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    return nn.functional.cross_entropy(output, target, label_smoothing=0.1)


def summed_ce(output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    return nn.functional.cross_entropy(output, target, reduction="sum") / 64.0


def _job(loss, reduction: str) -> trainpilot.Job:
    return trainpilot.Job(
        model=lambda: nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4)),
        data=Blobs(),
        loss=loss,
        optimizer=lambda params: torch.optim.SGD(params, lr=0.05, momentum=0.9),
        scheduler=lambda opt: torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5),
        metric="accuracy",
        batch_size=64,
        workers=0,
        loss_reduction=reduction,
        name="blobs",
    )


def make_job() -> trainpilot.Job:
    return _job(smoothed_ce, "mean")


def make_job_sum() -> trainpilot.Job:
    return _job(summed_ce, "sum")


def make_job_sum_said_mean() -> trainpilot.Job:
    """A summed loss declared a mean: the user's mistake, which halves each step on 2 equal ranks."""
    return _job(summed_ce, "mean")


def make_job_per_rank() -> trainpilot.Job:
    """A make_job that builds another model on rank 1 (a bug a user can write: a size read from the
    environment): the ranks must not train different models."""
    import os

    hidden = 32 if os.environ.get("RANK", "0") == "0" else 48
    job = _job(smoothed_ce, "mean")
    job.model = lambda: nn.Sequential(nn.Linear(16, hidden), nn.ReLU(), nn.Linear(hidden, 4))
    return job
