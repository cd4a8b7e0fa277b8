"""Short training runs on in-memory tensors: the dense model's training, the fine-tune after each
pruning, and held-out accuracy. Deterministic for a seed on the CPU."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

LEARNING_RATE = 1e-3
# Both the search's short fine-tune and the deployment fine-tune are warm restarts (SGDR,
# Loshchilov & Hutter 2017): the learning rate jumps back above the dense model's and anneals to 0
# again. Measured on small_cnn / demo (50 % of both convs cut, dense trained to convergence): a
# deployment fine-tune of 12 epochs at 5e-4 lost the most points, 24 epochs at 1e-3 fewer, 24 epochs
# at 2e-3 the fewest — a model that lost half its channels has to re-learn, not just settle. In the
# search, the old 30 steps at 5e-4 left validation accuracy scattered widely (it measured the
# damage, not what recovers); 100 steps at 2e-3 give a ranking closer to the deployed one
# (measured: docs/measurements.md#cited-in-the-code-compression).
RESTART_LR = 2e-3
# Fine-tuning a pruned model distils from the dense one (Hinton et al. 2015): its softened outputs
# carry more than the labels, which is what a model that just lost channels needs to recover.
DISTILL_WEIGHT = 0.7
DISTILL_TEMPERATURE = 4.0


@dataclass(frozen=True)
class Tensors:
    X: torch.Tensor
    y: torch.Tensor

    def __len__(self) -> int:
        return int(self.y.shape[0])


def tensors(dataset: object) -> Tensors:
    """A data.Dataset (arrays or memory maps) as float32 / int64 tensors."""
    X = np.asarray(dataset.X[:], dtype=np.float32)  # type: ignore[attr-defined]
    y = np.asarray(dataset.y, dtype=np.int64)  # type: ignore[attr-defined]
    return Tensors(torch.from_numpy(np.ascontiguousarray(X)), torch.from_numpy(y))


def train_steps(
    model: nn.Module,
    data: Tensors,
    *,
    steps: int,
    batch: int,
    lr: float,
    seed: int,
    threads: int,
    teacher: nn.Module | None = None,
) -> float:
    """`steps` Adam steps on shuffled mini-batches (epochs wrap around), the learning rate annealed
    from `lr` to 0 on a cosine: the model ends in a settled state, so the accuracy compared before
    and after pruning is not the luck of the last few steps. With a `teacher` (the dense model) the
    loss also distils its softened outputs. Returns the last loss."""
    gen = torch.Generator().manual_seed(seed)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    schedule = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=max(steps, 1))
    previous = torch.get_num_threads()
    torch.set_num_threads(threads)
    model.train()
    if teacher is not None:
        teacher.eval()
    loss = torch.tensor(float("nan"))
    order = torch.randperm(len(data), generator=gen)
    at = 0
    try:
        for _ in range(steps):
            if at + batch > len(data):
                order, at = torch.randperm(len(data), generator=gen), 0
            idx = order[at : at + batch]
            at += batch
            opt.zero_grad(set_to_none=True)
            logits = model(data.X[idx])
            loss = nn.functional.cross_entropy(logits, data.y[idx])
            if teacher is not None:
                with torch.no_grad():
                    soft = nn.functional.softmax(teacher(data.X[idx]) / DISTILL_TEMPERATURE, dim=1)
                distill = nn.functional.kl_div(
                    nn.functional.log_softmax(logits / DISTILL_TEMPERATURE, dim=1), soft, reduction="batchmean"
                )
                loss = (1 - DISTILL_WEIGHT) * loss + DISTILL_WEIGHT * DISTILL_TEMPERATURE**2 * distill
            loss.backward()
            opt.step()
            schedule.step()
    finally:
        torch.set_num_threads(previous)
    return float(loss.detach())


def samples_per_step(samples: int, batch: int) -> int:
    """What one of train_steps' steps trains on: `batch` samples, or the whole set when it is smaller."""
    return max(min(batch, samples), 1)


def steps_for_epochs(epochs: float, samples: int, batch: int) -> int:
    """Steps that make `epochs` passes over `samples`."""
    return max(1, round(epochs * samples / samples_per_step(samples, batch)))


@contextmanager
def _evaluating(model: nn.Module, threads: int) -> Iterator[None]:
    """`model` in eval mode, without gradients, on `threads` threads; all three restored after."""
    previous = torch.get_num_threads()
    torch.set_num_threads(threads)
    was = model.training
    model.eval()
    try:
        with torch.no_grad():
            yield
    finally:
        model.train(was)
        torch.set_num_threads(previous)


def right(model: nn.Module, data: Tensors, *, threads: int, batch: int = 512) -> torch.Tensor:
    """Which samples of `data` the model classifies right: one bool per sample, in order (what a
    paired accuracy interval compares, drop_interval.py)."""
    out = []
    with _evaluating(model, threads):
        for at in range(0, len(data), batch):
            out.append(model(data.X[at : at + batch]).argmax(1) == data.y[at : at + batch])
    return torch.cat(out) if out else torch.zeros(0, dtype=torch.bool)


def accuracy(model: nn.Module, data: Tensors, *, threads: int, batch: int = 512) -> float:
    """Share of `data` the model classifies right, in [0, 1]."""
    return int(right(model, data, threads=threads, batch=batch).sum()) / max(len(data), 1)


def mean_loss(model: nn.Module, data: Tensors, *, threads: int) -> float:
    """Mean cross-entropy of the model on `data` (one pass, whole split)."""
    with _evaluating(model, threads):
        return float(nn.functional.cross_entropy(model(data.X), data.y))
