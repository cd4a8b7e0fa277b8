"""The training step of one rank: its share of the batch through DistributedDataParallel.

Uneven shares are per-rank batch sizes with the loss scaled so that every step is the full-batch
step (not DDP's `Join`: parallel/step_clock.py says why, with the arithmetic). Every rank walks the
same seeded batch order (the single-process trainer's, or the job's own sampler's), taking its
slice of each batch; a short last batch is split again by the same speeds. The step is the job's
own: its loss or `step`, optimizer and scheduler, on its data (in memory, or a Dataset whose
loader workers load this rank's slices).
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import torch

from trainpilot.job.layout import batch_to_layout
from trainpilot.parallel.group import RankGroup
from trainpilot.parallel.rank_speed import RankSpeeds, equal_shares, measure_shares, refined_shares
from trainpilot.parallel.step_clock import StepClock, StepFigures, gradient_hook, shard_weight
from trainpilot.plans import Plan
from trainpilot.predict.shares import finish_time_shares
from trainpilot.run.trainer import StepResult, Trainer


class DistributedTrainer(Trainer):
    def __init__(self, *args: Any, group: RankGroup, share_policy: str = "measured", **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.group = group
        self.share_policy = share_policy
        self.speeds: RankSpeeds | None = None
        # A stop asked of this rank rides on the step's gradient all-reduce with its figures
        # (StepFigures); every rank then sees the same `peer_stop` and stops at the same boundary.
        self.wants_stop: Any = lambda: False
        self.peer_stop = False
        # This epoch's full-batch steps, timed to their gradients: the next epoch's shares come
        # from them (speed.refined_shares), when the shares are the measured ones.
        self._clock = StepClock()
        self._figures = StepFigures()

    def use_plan(self, plan: Plan) -> None:
        """The rank's plan, then the DDP wrapper (which checks every rank holds the same parameter
        shapes and broadcasts rank 0's values), then the speed measurement that sets the shares."""
        from torch.nn.parallel import DistributedDataParallel

        super().use_plan(plan)
        device_ids = [self.device.index] if self.device.type == "cuda" else None
        module = self.model
        self._check_same_model(module)
        self.model = self.group.guarded(
            "setting up DistributedDataParallel", lambda: DistributedDataParallel(module, device_ids=device_ids)
        )
        # Timed from the wrapped module's forward, after DDP's buffer broadcast, so a rank waiting
        # for the other there is not counted as slow; up to its gradients, before the all-reduce.
        self._clock.attach(module)
        self.model.register_comm_hook(None, gradient_hook(self._clock, self._figures))  # None: DDP's default group
        self.rebalance()

    def _check_same_model(self, module: Any) -> None:
        """Every rank built the same model (a `make_job` runs on each): one JobError on every rank
        naming the first difference, before DDP, whose own check of the shapes leaves the ranks
        waiting on each other until the timeout when they differ."""
        from trainpilot.errors import JobError

        mine = [(name, tuple(p.shape)) for name, p in module.named_parameters()]
        every = self.group.gather(mine, "checking that every rank built the same model")
        for rank, theirs in enumerate(every):
            if theirs == every[0]:
                continue
            where = next(
                (
                    f"{a[0]} is {a[1]} on rank 0, {b[0]} {b[1]} on rank {rank}"
                    for a, b in zip(every[0], theirs, strict=False)
                    if a != b
                ),
                f"rank 0 has {len(every[0])} parameter tensors, rank {rank} {len(theirs)}",
            )
            raise JobError(
                f"the ranks built different models ({where}): make_job must build the same model on every rank"
                " (sizes not read from RANK or anything that differs between processes)"
            )

    def rebalance(self) -> RankSpeeds:
        from trainpilot.job.objective import to_device

        n = max(1, min(self.batch_size // self.group.world_size, len(self.train_set)))
        sample = batch_to_layout(to_device(self.train_set.batch(np.arange(n)), self.device), self._layout)
        self.speeds = measure_shares(
            self.group, self.full_model, sample, self.objective, self.batch_size, self.device, self.share_policy
        )
        return self.speeds

    def shares_for(self, batch: int) -> tuple[int, ...]:
        assert self.speeds is not None
        if batch == sum(self.speeds.shares):
            return self.speeds.shares
        if self.share_policy == "equal":
            return equal_shares(batch, self.group.world_size)
        return finish_time_shares(batch, self.speeds.per_sample_s)

    def rank_slice(self, batch_idx: np.ndarray) -> tuple[np.ndarray, int]:
        """(the samples this rank runs of one batch, its share). A rank whose share is 0 (a short
        last batch among many ranks) still runs one sample, its loss weighted 0: DDP needs every
        rank's gradients."""
        shares = self.shares_for(len(batch_idx))
        first = sum(shares[: self.group.rank])
        mine = batch_idx[first : first + shares[self.group.rank]]
        return (mine if len(mine) else batch_idx[:1]), len(mine)

    def epoch_batches(self, epoch: int, step: int) -> list[np.ndarray]:
        """What a loader (a Dataset's workers) delivers to this rank: its slice of every batch.
        The shares of an epoch are set at its first step, before the loader is built."""
        return [self.rank_slice(b)[0] for b in super().epoch_batches(epoch, step)]

    def train_step(self, epoch: int, step: int) -> StepResult:
        """Step `step` of `epoch` on this rank's share; the figures returned are the whole batch's."""
        from trainpilot.job.objective import batch_size_of, to_device

        start = time.perf_counter()
        if step == 0 and self._clock.per_sample_s and self.share_policy == "measured" and self.speeds is not None:
            # every rank reaches an epoch's first step together (the last step's all-reduce), so
            # the gather below is a collective they all enter
            self.speeds = refined_shares(self.group, self._clock.close_epoch(), self.speeds, self.batch_size, epoch)
        order = self.epoch_order(epoch)
        batch_idx = order[step * self.batch_size : (step + 1) * self.batch_size]
        idx, share = self.rank_slice(batch_idx)
        batch = batch_to_layout(to_device(self._fetch(epoch, step, idx), self.device, non_blocking=True), self._layout)
        n = (batch_size_of(batch) or len(idx)) if share else 0
        self.model.train()
        self.optimizer.zero_grad(set_to_none=True)
        # full batches only: a short last batch's fixed per-step cost weighs more per sample
        with self._clock.timing(n if len(batch_idx) == self.batch_size else 0):
            with self.autocast():
                loss, output, target = self.objective(self.model, batch)
            # the job's loss on its share, weighted so DDP's average is the whole batch's step
            weight = shard_weight(self.loss_reduction, n, len(batch_idx), self.group.world_size)
            metric = (self.objective.metric(output, target) or 0.0) if n else 0.0
            part = float(loss.detach()) * (n if self.loss_reduction == "mean" else 1) if n else 0.0
            figures = [part, metric * n, float(n), 1.0 if self.wants_stop() else 0.0]
            self._figures.put(figures)  # they ride on the gradient all-reduce (StepFigures)
            self.group.guarded(
                f"the gradient all-reduce of epoch {epoch + 1}, step {step + 1}", (loss * weight).backward
            )
        # Before the optimizer step: if a peer is gone, this step has changed nothing yet, so the
        # checkpoint rank 0 then writes is the state at this step's start.
        summed = self._figures.summed
        if summed is None:  # no gradient bucket carried them (no trainable parameters, half precision)
            self._figures.take()
            summed = self.group.sum(figures, f"epoch {epoch + 1}, step {step + 1}")
        loss_total, metric_total, seen, stops = summed
        self.peer_stop = stops > 0
        self.optimizer.step()
        return StepResult(
            epoch,
            step + 1,
            self.steps_per_epoch,
            loss_total / max(seen, 1.0) if self.loss_reduction == "mean" else loss_total,
            metric_total,
            int(seen),
            time.perf_counter() - start,
        )

    def weight_spread(self) -> float:
        """Max abs difference of any weight between ranks (DDP keeps them equal; this checks it)."""
        tensors = [
            t.detach().reshape(-1).double().cpu()
            for t in self.full_model.state_dict().values()
            if t.is_floating_point()
        ]
        return self.group.spread(torch.cat(tensors), "the end-of-run weight check")

    def evaluate(self) -> float | None:
        """Validation shared out: each rank runs the job's loss and metric on its slice of the
        held-out set, and the sums are gathered, so every rank holds the whole set's figures (every
        rank validates at the same epoch end, so the sum is a collective they all enter)."""
        self.last_val_loss = None
        n = len(self.val_set)
        if n == 0:
            return None
        mine = np.array_split(np.arange(n), self.group.world_size)[self.group.rank]
        sums = self.validation_sums(self.val_set.subset(mine)) if len(mine) else (0.0, 0.0, 0.0)
        total = self.group.sum(list(sums), "gathering the validation figures")
        return self._from_sums(*total)
