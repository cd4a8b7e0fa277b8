"""The pieces of one rank's DDP step: its shard of the loss, the clock that times it to its
gradients, and the figures that ride on the gradient all-reduce (run/distributed_trainer.py
assembles the step from them).

Uneven shares are per-rank batch sizes with the loss scaled, not DDP's `Join`. `Join` is for ranks
that run out of batches at different times: it shadows the missing all-reduces with zeros and
still divides by the world size, so a step is no longer the full-batch step, and the fast rank
idles at the end instead of every step being balanced. Here every rank takes part in every step
with the samples it can finish in the same time, and rank i's loss is

    sum of its samples' losses * world_size / batch

so DDP's average over ranks, (1/world) * sum_i world/batch * sum grad = (1/batch) * sum of all
samples' gradients: exactly the gradient of the mean loss over the whole batch, as one process
would compute it (up to float summation order).

Every rank walks the same seeded batch order (the single-process trainer's), taking its slice of
each batch; a short last batch is split again by the same speeds.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch
from torch import nn


def shard_weight(reduction: str, n: int, batch: int, world_size: int) -> float:
    """What a rank multiplies its loss on `n` of a `batch`-sample step by, so that DDP's average
    over ranks is the gradient of the loss one process computes on the whole batch: for a mean,
    n * world_size / batch (its samples' sum, times world_size / batch, as `shard_loss`); for a
    sum, world_size (the sums add up, DDP's average divides by the ranks). Exact for a loss that is
    a per-sample mean or sum; a loss that couples the samples (a contrastive loss) is not."""
    from trainpilot.job.spec import LOSS_REDUCTIONS

    if reduction not in LOSS_REDUCTIONS:
        raise ValueError(f"loss_reduction must be one of {', '.join(LOSS_REDUCTIONS)}, got {reduction!r}")
    return float(world_size) if reduction == "sum" else n * world_size / batch


def shard_loss(logits: torch.Tensor, y: torch.Tensor, batch: int, world_size: int) -> tuple[torch.Tensor, torch.Tensor]:
    """A rank's shard of a `batch`-sample step: (the sum of its samples' losses, the loss it
    backpropagates: that sum times world_size / batch), so DDP's average over ranks is the mean
    loss's gradient over the whole batch. A function of its own so that a check
    (benchmarks/equivalence.py) combines shards exactly as the ranks do."""
    loss_sum = nn.functional.cross_entropy(logits, y, reduction="sum")
    return loss_sum, loss_sum * (world_size / batch)


class StepClock:
    """Seconds per sample from a training step's forward start to the moment its gradients are
    ready to all-reduce: the rank's own compute, wall clock, with whatever preemption it met, and
    none of the waiting for the other ranks (which comes after, inside the all-reduce).

    Why wall time to "gradients ready" and not the forward alone: on a core that another program
    shares, the scheduler gives the rank full-speed slices and then takes the core away. A forward
    pass is short enough to fit in one slice, so its time says the rank is as fast as a free one;
    the backward, twice as long, is where the core is taken. The whole compute span, averaged over
    the epoch, is what the step has to wait for (StarPU balances predicted finish times the same way).

    Taken only inside `timing(n)` (a training step's full batch), so evaluation and the speed
    probe's copy are never counted. The forward hook is a plain closure: the probe deep-copies the
    model with its hooks, and a bound method would drag the whole trainer (and its DDP wrapper) in."""

    # Epochs whose steps the next shares are computed from: the newest few, so a change on the
    # machine shows within as many epochs, and each estimate averages more than one epoch's steps
    # (small_cnn on the demo set: 8 steps an epoch; one epoch's mean read rank 1's slow-down very
    # differently in runs of the same setup: docs/measurements.md#cited-in-the-code-ranks).
    WINDOW_EPOCHS = 3

    def __init__(self) -> None:
        self.per_sample_s: list[float] = []  # the epoch being timed
        self._recent: deque[list[float]] = deque(maxlen=self.WINDOW_EPOCHS)
        self._samples = 0  # of the step being timed; 0: not timing
        self._t0 = 0.0
        self._handles: list[Any] = []

    def attach(self, module: nn.Module) -> None:
        """Time from `module`'s forward start (the model inside DDP: after DDP's own buffer
        broadcast); `gradients_ready` ends the span."""
        for handle in self._handles:  # a new plan wraps a new module: time that one only
            handle.remove()

        def started(*_: Any) -> None:
            self._t0 = time.perf_counter()

        self._handles = [module.register_forward_pre_hook(started)]
        self.per_sample_s = []
        self._recent.clear()

    def close_epoch(self) -> list[float]:
        """The epoch that ended joins the window; returns every step figure in the window."""
        if self.per_sample_s:
            self._recent.append(self.per_sample_s)
        self.per_sample_s = []
        return [v for epoch in self._recent for v in epoch]

    def gradients_ready(self) -> None:
        if self._samples:
            self.per_sample_s.append((time.perf_counter() - self._t0) / self._samples)

    @contextmanager
    def timing(self, samples: int) -> Iterator[None]:
        self._samples = samples
        try:
            yield
        finally:
            self._samples = 0


class StepFigures:
    """The step's figures (loss sum, correct, samples, stop asked), summed over the ranks inside the
    gradient all-reduce instead of a collective of their own: on a core another program shares,
    every collective waits for that rank to be scheduled again, and that wait is paid by the whole
    step (measured in a 2-rank loop on such a core, for each collective added:
    docs/measurements.md#heteropy)."""

    def __init__(self) -> None:
        self._riding: torch.Tensor | None = None  # this step's, until the last bucket takes them
        self.summed: list[float] | None = None  # over the ranks, once the all-reduce is done

    def put(self, values: list[float]) -> None:
        self._riding, self.summed = torch.tensor(values, dtype=torch.float64), None

    def take(self) -> torch.Tensor | None:
        riding, self._riding = self._riding, None
        return riding


# Gradient dtypes the figures can ride in: float32 keeps counts exact up to 2**24; half precision
# would round them, so with half-precision gradients the figures take a collective of their own.
RIDING_DTYPES = (torch.float32, torch.float64)


def gradient_hook(clock: StepClock, figures: StepFigures) -> Any:
    """A DDP communication hook: DDP's own average of each gradient bucket, with the clock stopped
    at the last bucket and the step's figures riding, unaveraged, at its end. Every rank's DDP
    reduces its buckets in the same order, so the last one is the same on all."""
    import torch.distributed as dist
    from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook

    def hook(state, bucket):  # unannotated: DDP rejects annotations other than its own
        last = bucket.is_last()
        if last:
            clock.gradients_ready()
        riding = figures.take() if last and bucket.buffer().dtype in RIDING_DTYPES else None
        if riding is None:
            return allreduce_hook(state, bucket)  # DDP's own: divide by the world size, all-reduce
        group = state if state is not None else dist.group.WORLD
        grads = bucket.buffer().div_(dist.get_world_size(group))
        packed = torch.cat([grads, riding.to(grads.device, grads.dtype)])

        def unpack(fut):
            out = fut.value()[0]
            figures.summed = [float(v) for v in out[grads.numel() :].cpu()]
            grads.copy_(out[: grads.numel()])
            return grads

        return dist.all_reduce(packed, group=group, async_op=True).get_future().then(unpack)

    return hook
