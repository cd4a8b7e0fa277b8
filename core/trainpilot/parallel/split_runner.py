"""One training step on several workers at once: each takes its share of the batch, computes the
gradient of its shard's mean loss, and the gradients are summed weighted by shard size, which is
the gradient of the whole batch's mean loss. The optimizer then steps once, on the host's weights,
so the step is the single-device step on the whole batch up to float summation order.

Workers are threads of this process. A CPU worker computes on the host's own parameters (reading
them only: `torch.autograd.grad` returns its gradients instead of accumulating into `.grad`, so
two workers never write the same tensor); an accelerator worker keeps a replica on its device,
refreshed from the host's weights before each step. PyTorch runs each operator's kernel without the
interpreter lock, and a CPU backward runs on the thread that asked for it, so CPU workers with one
intra-op thread each really compute at the same time; their Python does not (split_cost.py
predicts that).

Shares: StarPU's dmda with a history-based model. Each worker's step time is fitted as
`fixed + n * per_sample` over its recent steps in this run (least squares; the shares, and the
epoch's last smaller batch, give the spread of n), and every batch is divided by
`finish_time_shares`. The first steps skew the split in turn to see how each worker's time grows
(the very first is not timed: warm-up); until a fit exists, or when a worker's step does not grow
with its share (all overhead), the split is even. Fitting time per sample alone would feed back:
a worker given more samples looks faster per sample when its step has a fixed part.
"""

from __future__ import annotations

import copy
import time
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import torch
from torch import nn

from trainpilot.errors import BackendUnavailable, JobError
from trainpilot.job.objective import batch_size_of, slice_batch, to_device
from trainpilot.job.precision import autocast
from trainpilot.job.workload import batch_dependent_layers
from trainpilot.plans import Plan
from trainpilot.predict.shares import finish_time_shares, shard_weights

EXPLORE_STEPS = 8  # steps that may skew the split to learn how each worker's time grows with its share
WINDOW = 24  # recent steps per worker in the fit: a few epochs' worth of spread, but follows load changes


class WorkerModel:
    """A worker's linear step-time model, fitted on its own measured steps in this run."""

    def __init__(self) -> None:
        self.points: deque[tuple[int, float]] = deque(maxlen=WINDOW)

    def add(self, samples: int, seconds: float) -> None:
        if samples > 0:
            self.points.append((samples, seconds))

    @property
    def spread(self) -> bool:
        return len({n for n, _ in self.points}) >= 2

    def fit(self) -> tuple[float, float] | None:
        """(fixed_s, per_sample_s) by least squares, or None until the step is seen to grow with
        its share (a step all overhead does not: then any split is as good as another)."""
        if len(self.points) < 3 or not self.spread:
            return None
        ns = [n for n, _ in self.points]
        mean_n = sum(ns) / len(ns)
        mean_t = sum(t for _, t in self.points) / len(self.points)
        sxx = sum((n - mean_n) ** 2 for n in ns)
        slope = sum((n - mean_n) * (t - mean_t) for n, t in self.points) / sxx
        if slope <= 0:
            return None
        fixed = max(mean_t - slope * mean_n, 0.0)
        return fixed, (mean_t - fixed) / mean_n


class SplitRunner:
    def __init__(self, model: nn.Module, plan: Plan):
        self.plan = plan
        self.workers = plan.workers
        if len(self.workers) < 2:
            raise BackendUnavailable(f"a split plan needs at least two workers, got '{plan.mode}'")
        bad = batch_dependent_layers(model)
        if bad:
            raise BackendUnavailable(
                f"cannot split a batch across workers: {', '.join(bad[:3])} compute(s) something different"
                " on a shard than on the whole batch"
            )
        self.devices = [
            torch.device(w.device or w.backend) if w.backend != "cpu" else torch.device("cpu") for w in self.workers
        ]
        self.replicas: list[nn.Module | None] = [
            None if d.type == "cpu" else copy.deepcopy(model).to(d) for d in self.devices
        ]
        self.models = [WorkerModel() for _ in self.workers]
        self.last_shares: tuple[int, ...] = ()
        self.last_worker_s: tuple[float, ...] = ()
        self.steps = 0
        self._pool = ThreadPoolExecutor(max_workers=len(self.workers) - 1, thread_name_prefix="trainpilot-split")

    def close(self) -> None:
        self._pool.shutdown(wait=True)

    def shares(self, batch: int) -> tuple[int, ...]:
        k = len(self.models)
        fits = [m.fit() for m in self.models]
        if all(f is not None for f in fits):
            return finish_time_shares(batch, [f[1] for f in fits], [f[0] for f in fits])  # type: ignore[index]
        if self.steps < EXPLORE_STEPS and not all(m.spread for m in self.models):
            # too little spread in the shares to fit a fixed cost: skew the split in turn (StarPU
            # calibrates its history models on tasks of different sizes the same way)
            return finish_time_shares(batch, [1.0 if i != self.steps % k else 1.5 for i in range(k)])
        return finish_time_shares(batch, [1.0] * k)

    def forward_backward(
        self, model: nn.Module, objective: Any, batch: Any, reduction: str = "mean"
    ) -> tuple[torch.Tensor, Any, Any]:
        """Set every parameter's .grad to the whole batch's loss gradient and return (loss, output,
        target) of the whole batch, as `objective(model, batch)` and `loss.backward()` on one
        device would have. `objective`: the job's loss or step (job/objective.py); `reduction`: what
        its loss does over a batch's samples (mean or sum: Job.loss_reduction), which weighs each
        worker's share. The output and target are the shares' joined, None where they are not
        tensors (a step hides them)."""
        params = [p for p in model.parameters() if p.requires_grad]
        shares = self.shares(batch_size_of(batch))
        bounds = [0]
        for n in shares:
            bounds.append(bounds[-1] + n)
        try:
            jobs = [(i, slice_batch(batch, bounds[i], bounds[i + 1])) for i, n in enumerate(shares) if n]
        except JobError as exc:  # the plan cannot run this job: the run falls back with the reason
            raise BackendUnavailable(f"a split cannot share this job's batches: {exc.problem}") from None

        def work(i: int, shard: Any) -> tuple[int, Any, Any, torch.Tensor, tuple[Any, ...], float]:
            start = time.perf_counter()
            replica = self.replicas[i]
            if replica is None:
                net, net_params = model, params
            else:
                net, device = replica, self.devices[i]
                net_params = [p for p in replica.parameters() if p.requires_grad]
                with torch.no_grad():
                    for mine, host in zip(net_params, params, strict=False):
                        mine.copy_(host, non_blocking=True)
                net.train(model.training)
                shard = to_device(shard, device, non_blocking=True)
            with autocast(self.devices[i], self.plan.precision):  # autocast is per thread: set in each worker
                loss, output, target = objective(net, shard)
            grads = torch.autograd.grad(loss, net_params, allow_unused=True)
            if replica is not None:
                grads = tuple(g.to("cpu") if g is not None else None for g in grads)
                output, target = (
                    to_device(_detached(output), torch.device("cpu")),
                    to_device(target, torch.device("cpu")),
                )
            return i, _detached(output), target, loss.detach().to("cpu"), grads, time.perf_counter() - start

        futures = [self._pool.submit(work, *job) for job in jobs[1:]]
        results = [work(*jobs[0])] + [f.result() for f in futures]
        results.sort(key=lambda r: r[0])
        weights = shard_weights(shares) if reduction == "mean" else tuple(1.0 for _ in shares)
        for j, p in enumerate(params):
            total = None
            for i, _out, _target, _loss, grads, _t in results:
                g = grads[j]
                if g is None:
                    continue
                total = g * weights[i] if total is None else total.add_(g, alpha=weights[i])
            p.grad = total
        if self.steps > 0:  # a fresh model's (and a fresh thread's) first step is slower than the rest: not a speed
            for i, _out, _target, _loss, _grads, seconds in results:
                self.models[i].add(shares[i], seconds)
        self.steps += 1
        self.last_shares = shares
        self.last_worker_s = tuple(next((r[5] for r in results if r[0] == i), 0.0) for i in range(len(shares)))
        loss = sum(r[3] * weights[r[0]] for r in results)
        return loss, _joined([r[1] for r in results]), _joined([r[2] for r in results])  # type: ignore[return-value]


def _detached(value: Any) -> Any:
    return value.detach() if isinstance(value, torch.Tensor) else value


def _joined(parts: list[Any]) -> Any:
    """The shares' outputs (or targets) as the whole batch's: tensors joined along the samples."""
    if parts and all(isinstance(p, torch.Tensor) and p.ndim for p in parts):
        return torch.cat(parts)
    return None
