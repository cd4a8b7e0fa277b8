"""The loss each rank backpropagates: DDP's average of the shards' gradients must be the gradient of
the mean loss over the whole batch, whatever the shares (no process group needed to check it)."""
from __future__ import annotations

import torch
from torch import nn

from trainpilot.parallel.step_clock import shard_loss


def _grads(model: nn.Module) -> list[torch.Tensor]:
    return [p.grad.detach().clone() for p in model.parameters()]


def _combined(model: nn.Module, x: torch.Tensor, y: torch.Tensor, shares: tuple[int, ...], loss_of) -> list[torch.Tensor]:
    total, first, world = None, 0, len(shares)
    for n in shares:
        model.zero_grad(set_to_none=True)
        loss_of(model(x[first : first + n]), y[first : first + n], len(x), world).backward()
        first += n
        part = [g / world for g in _grads(model)]  # DDP: each rank's gradient, averaged over ranks
        total = part if total is None else [a + b for a, b in zip(total, part)]
    return total


def test_uneven_shards_combine_to_the_whole_batch_gradient():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(12, 16), nn.ReLU(), nn.Linear(16, 5))
    x, y = torch.randn(256, 12), torch.randint(0, 5, (256,))
    model.zero_grad(set_to_none=True)
    nn.functional.cross_entropy(model(x), y).backward()
    reference = _grads(model)
    scale = max(float(g.abs().max()) for g in reference)

    def diff(grads: list[torch.Tensor]) -> float:
        return max(float((a - b).abs().max()) for a, b in zip(grads, reference))

    for shares in [(180, 76), (128, 128), (255, 1)]:
        assert diff(_combined(model, x, y, shares, lambda logits, t, batch, world: shard_loss(logits, t, batch, world)[1])) < 1e-5 * scale, shares
    # each shard's own mean (what plain DDP with uneven shards does) is visibly wrong
    own_mean = _combined(model, x, y, (180, 76), lambda logits, t, batch, world: nn.functional.cross_entropy(logits, t))
    assert diff(own_mean) > 100 * 1e-5 * scale


def test_the_shard_loss_sum_is_the_shards_summed_loss():
    logits, y = torch.randn(10, 3), torch.randint(0, 3, (10,))
    loss_sum, scaled = shard_loss(logits, y, batch=40, world_size=2)
    assert float(loss_sum) == float(nn.functional.cross_entropy(logits, y, reduction="sum"))
    assert float(scaled) == float(loss_sum * (2 / 40))
