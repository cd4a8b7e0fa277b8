"""How one batch of a job becomes a loss (and, with a loss form, an output and a target for the
metric): the user's `step(model, batch)`, or `loss(model(inputs), target)` with the batch taken
apart as tuples `(x, ..., target)` and dicts `{..., "label": target}` are."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from trainpilot.errors import JobError, describe_exception

TARGET_KEYS = ("target", "targets", "label", "labels", "y")


def split_batch(batch: Any) -> tuple[tuple[Any, ...], dict[str, Any], Any]:
    """(positional inputs, keyword inputs, target) of a batch in a loss-form job."""
    if isinstance(batch, (tuple, list)):
        if len(batch) < 2:
            raise JobError(
                f"a batch of {len(batch)} item(s) has no target: give (inputs, target), or step= for anything else"
            )
        return tuple(batch[:-1]), {}, batch[-1]
    if isinstance(batch, Mapping):
        key = next((k for k in TARGET_KEYS if k in batch), None)
        if key is None:
            raise JobError(
                f"a dict batch needs its target under one of {', '.join(TARGET_KEYS)}"
                f" (keys: {', '.join(map(str, batch))}); or give step="
            )
        return (), {k: v for k, v in batch.items() if k != key}, batch[key]
    raise JobError(f"a batch of type {type(batch).__name__} has no (inputs, target): give step=(model, batch) -> loss")


def to_device(batch: Any, device: torch.device, non_blocking: bool = False) -> Any:
    """The batch with every tensor in it (tuples, lists, dicts, nested) on `device`."""
    if isinstance(batch, torch.Tensor):
        return batch.to(device, non_blocking=non_blocking)
    if isinstance(batch, Mapping):
        return type(batch)({k: to_device(v, device, non_blocking) for k, v in batch.items()})  # type: ignore[call-arg]
    if isinstance(batch, tuple) and hasattr(batch, "_fields"):  # a namedtuple
        return type(batch)(*(to_device(v, device, non_blocking) for v in batch))
    if isinstance(batch, (tuple, list)):
        return type(batch)(to_device(v, device, non_blocking) for v in batch)
    return batch


def slice_batch(batch: Any, start: int, stop: int) -> Any:
    """Samples [start, stop) of a batch: every tensor with the batch's samples along its first
    dimension cut there (tuples, lists, dicts, nested). A JobError where a tensor does not have the
    batch's samples first (what a split plan cannot share among its workers)."""
    n = batch_size_of(batch)

    def cut(value: Any) -> Any:
        if isinstance(value, torch.Tensor):
            if value.ndim == 0 or value.shape[0] != n:
                raise JobError(
                    f"a tensor of shape {tuple(value.shape)} in a batch of {n} samples does not hold them along"
                    " its first dimension: the batch cannot be shared among workers"
                )
            return value[start:stop]
        if isinstance(value, Mapping):
            return type(value)({k: cut(v) for k, v in value.items()})  # type: ignore[call-arg]
        if isinstance(value, tuple) and hasattr(value, "_fields"):  # a namedtuple
            return type(value)(*(cut(v) for v in value))
        if isinstance(value, (tuple, list)):
            return type(value)(cut(v) for v in value)
        return value

    return cut(batch)


def batch_size_of(batch: Any) -> int:
    """Samples in a batch: the first dimension of the first tensor found in it."""
    if isinstance(batch, torch.Tensor):
        return int(batch.shape[0]) if batch.ndim else 1
    items = batch.values() if isinstance(batch, Mapping) else batch if isinstance(batch, (tuple, list)) else ()
    for item in items:
        n = batch_size_of(item)
        if n:
            return n
    return 0


def describe_batch(batch: Any) -> str:
    """A batch's structure and shapes in one line, for errors: `(int64[32, 16], int64[32])`."""
    if isinstance(batch, torch.Tensor):
        return f"{str(batch.dtype).removeprefix('torch.')}[{', '.join(map(str, batch.shape))}]"
    if isinstance(batch, Mapping):
        return "{" + ", ".join(f"{k}: {describe_batch(v)}" for k, v in batch.items()) + "}"
    if isinstance(batch, (tuple, list)):
        inner = ", ".join(describe_batch(v) for v in batch)
        return f"({inner})" if isinstance(batch, tuple) else f"[{inner}]"
    return type(batch).__name__


def mse_loss(output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """MSE that lines a (N,) target up with a (N, 1) output instead of broadcasting to (N, N)."""
    if output.shape != target.shape and output.numel() == target.numel():
        target = target.reshape(output.shape)
    return nn.functional.mse_loss(output, target.to(output.dtype))


def accuracy(output: torch.Tensor, target: torch.Tensor) -> float:
    """Share of samples whose highest logit is the target class (one logit: its sign)."""
    if output.ndim == 2 and output.shape[1] == 1:
        predicted = (output[:, 0] > 0).long()
    else:
        predicted = output.argmax(dim=1)
    return float((predicted == target).float().mean())


def default_loss(target: Any) -> tuple[Callable[..., Any], str]:
    """Cross-entropy for integer targets, MSE for float ones (the loss's name for the trace)."""
    if isinstance(target, torch.Tensor) and not target.dtype.is_floating_point and not target.dtype.is_complex:
        return nn.functional.cross_entropy, "cross-entropy (integer targets)"
    if isinstance(target, torch.Tensor):
        return mse_loss, "mean squared error (float targets)"
    raise JobError(f"the target is a {type(target).__name__}, not a tensor: give loss= or step=")


@dataclass
class Objective:
    """One batch -> (loss, output, target). `loss_fn` is None for a step-form job (its output and
    target stay inside the step; only the loss comes out)."""

    loss_fn: Callable[..., Any] | None
    step_fn: Callable[..., Any] | None
    metric_fn: Callable[..., float] | None
    loss_name: str
    metric_name: str | None

    @property
    def has_metric(self) -> bool:
        return self.metric_fn is not None

    def __call__(self, model: nn.Module, batch: Any) -> tuple[torch.Tensor, Any, Any]:
        if self.step_fn is not None:
            loss = self.step_fn(model, batch)
            if isinstance(loss, Mapping) and "loss" in loss:  # Lightning's training_step may return {"loss": ...}
                loss = loss["loss"]
            return check_loss(loss, "step"), None, None
        args, kwargs, target = split_batch(batch)
        output = model(*args, **kwargs)
        assert self.loss_fn is not None
        return check_loss(self.loss_fn(output, target), "loss"), output, target

    def metric(self, output: Any, target: Any) -> float | None:
        if self.metric_fn is None or output is None:
            return None
        with torch.no_grad():  # a metric is read, not trained: no graph, no requires_grad warnings
            detached = output.detach() if isinstance(output, torch.Tensor) else output
            return float(self.metric_fn(detached, target))


def check_loss(loss: Any, what: str) -> torch.Tensor:
    if not isinstance(loss, torch.Tensor):
        raise JobError(f"the {what} returned {type(loss).__name__}, not a tensor: it must return the loss as a tensor")
    if loss.numel() != 1:
        raise JobError(
            f"the {what} returned a tensor of shape {tuple(loss.shape)}, not a scalar (reduce it, e.g. .mean())"
        )
    return loss.reshape(())


def resolve_objective(job: Any, first_batch: Any) -> Objective:
    """The job's loss, step and metric, with the defaults the first batch's target decides."""
    metric_fn: Callable[..., float] | None = None
    metric_name: str | None = None
    if job.metric == "accuracy":
        metric_fn, metric_name = accuracy, "accuracy"
    elif callable(job.metric):
        metric_fn, metric_name = job.metric, getattr(job.metric, "__name__", "metric")
    if job.step is not None:
        return Objective(None, job.step, None, f"step {getattr(job.step, '__name__', 'step')}()", None)
    if job.loss is not None:
        name = getattr(job.loss, "__name__", type(job.loss).__name__)
        return Objective(job.loss, None, metric_fn, name, metric_name)
    try:
        target = split_batch(first_batch)[2]
    except JobError as exc:
        raise JobError(f"{exc.problem} (batch: {describe_batch(first_batch)})") from None
    loss_fn, loss_name = default_loss(target)
    return Objective(loss_fn, None, metric_fn, loss_name, metric_name)


def explain_failure(job_title: str, batch: Any, exc: BaseException) -> JobError:
    """One error for a first batch that failed: the model, the batch's structure and the exception."""
    if isinstance(exc, JobError):
        return JobError(f"{job_title}: {exc.problem} (batch: {describe_batch(batch)})")
    return JobError(f"{job_title}: the first batch {describe_batch(batch)} failed: {describe_exception(exc)}")
