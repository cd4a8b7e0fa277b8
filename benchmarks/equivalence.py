"""Is a 2-rank run the single-process run? Two checks, each against what float order alone does.

Why not "end weights within 1e-5": measured here (small_cnn, demo set, batch 256, 2 epochs), the
*same single-process run* with each batch's samples taken in another order ends up to 1.0e-04 away
from itself. The cause, traced step by step: the two trajectories stay ~6e-08 apart (float
summation order) until one ReLU pre-activation lies within that distance of 0 (2.4e-08 at epoch 1,
step 8) and flips, and a max-pool picks the other input: from then on that sample's gradient takes
another path (4.6e-05 apart in one step) and Adam carries it on. SGD does it too (2.4e-05). Which
shares hit such a kink is chance: 167/89 ended 2.3e-07 away, 154/102 1.0e-04, like the permuted runs.
So the checks are:
  1. the first step's gradient, combined from the shards as the ranks combine them
     (`distributed.trainer.shard_loss`, then DDP's average), against the single-device gradient on the
     same batch and weights: a float tolerance relative to the gradient's size, with the same batch
     in permuted order printed beside it (wrong shard weighting, e.g. each shard's own mean, is
     6e-03 away; float order 4e-08 to 7e-08);
  2. the end weights against the single-process run, within the spread that float order alone
     makes to that run: the same job in this process (the product's Trainer, first checked to end
     bit-identical to the `--threads 1` command) with each batch's samples permuted, a few seeds.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np
import torch

GRAD_RTOL = 1e-5  # float32 sums of a few hundred terms: measured ~1e-6 of the largest gradient
END_MARGIN = 2.0  # the 2-rank run is one more float-order perturbation: within 2x the largest of a few


def _grads(model: torch.nn.Module) -> list[torch.Tensor]:
    return [p.grad.detach().clone() if p.grad is not None else torch.zeros_like(p) for p in model.parameters()]


def _max_abs(a: list[torch.Tensor], b: list[torch.Tensor]) -> float:
    return max(float((x - y).abs().max()) for x, y in zip(a, b))


def _xy(data: Any, idx: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.as_tensor(np.asarray(data.X[idx]), dtype=torch.float32), torch.as_tensor(data.y[idx])


def single_gradient(model: torch.nn.Module, data: Any, idx: np.ndarray) -> list[torch.Tensor]:
    """The single-process step's gradient: the mean loss over the whole batch (Trainer's loss)."""
    x, y = _xy(data, idx)
    model.zero_grad(set_to_none=True)
    torch.nn.functional.cross_entropy(model(x), y).backward()
    return _grads(model)


def combined_gradient(model: torch.nn.Module, data: Any, idx: np.ndarray, shares: tuple[int, ...]) -> list[torch.Tensor]:
    """The gradient the ranks apply: each shard's `shard_loss` backpropagated, then DDP's average
    (each rank's gradient / world size, summed)."""
    from trainpilot.parallel.step_clock import shard_loss

    world, total, first = len(shares), None, 0
    for n in shares:
        x, y = _xy(data, idx[first : first + n])
        first += n
        model.zero_grad(set_to_none=True)
        shard_loss(model(x), y, len(idx), world)[1].backward()
        part = [g / world for g in _grads(model)]
        total = part if total is None else [a + b for a, b in zip(total, part)]
    assert total is not None
    return total


def first_step_check(model: torch.nn.Module, data: Any, idx: np.ndarray, shares: tuple[int, ...], permutations: int = 3) -> dict[str, float]:
    """The first step's combined gradient vs the single-device one (same weights, same batch), and
    the float-order scale: the single-device gradient of the same batch in permuted order."""
    reference = single_gradient(model, data, idx)
    permuted = [single_gradient(model, data, idx[np.random.default_rng(s).permutation(len(idx))]) for s in range(1, permutations + 1)]
    diff = _max_abs(combined_gradient(model, data, idx, shares), reference)
    size = max(float(g.abs().max()) for g in reference)
    return {"diff": diff, "grad_max": size, "tolerance": GRAD_RTOL * size, "float_order": max(_max_abs(p, reference) for p in permuted)}


def in_batch_permuted(order: np.ndarray, batch: int, seed: Any) -> np.ndarray:
    """The same batches, each one's samples in another order: only the summation order changes."""
    out = order.copy()
    rng = np.random.default_rng(seed)
    for start in range(0, len(out), batch):
        out[start : start + batch] = rng.permutation(out[start : start + batch])
    return out


def train_in_process(make_trainer: Callable[[], Any], epochs: int, permute_seed: int | None = None) -> dict[str, torch.Tensor]:
    """Run the job with the product's Trainer here, optionally with every batch permuted inside."""
    trainer = make_trainer()
    if permute_seed is not None:
        plain = trainer.epoch_order
        cache: dict[int, np.ndarray] = {}

        def permuted(epoch: int) -> np.ndarray:
            if epoch not in cache:
                cache[epoch] = in_batch_permuted(plain(epoch), trainer.batch_size, [permute_seed, epoch])
            return cache[epoch]

        trainer.epoch_order = permuted
    for epoch in range(epochs):
        for step in range(trainer.steps_per_epoch):
            trainer.train_step(epoch, step)
    return {k: v.detach().clone() for k, v in trainer.full_model.state_dict().items()}


def max_abs_diff(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> float:
    return max(float((a[k] - b[k]).abs().max()) for k in a)
