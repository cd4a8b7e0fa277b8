"""How one batch of a job becomes a loss (and, with a loss form, an output and a target for the
metric): the user's `step(model, batch)`, or `loss(model(inputs), target)` with the batch taken
apart as tuples `(x, ..., target)` and dicts `{..., "label": target}` are, or — for a model that
computes its own loss, as Hugging Face's do — `model(**batch).loss` with the target left in the batch."""

from __future__ import annotations

import inspect
import sys
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


def model_output_type() -> type | None:
    """transformers' `ModelOutput` when transformers is loaded (a model that returns one has loaded
    it), so the job layer never imports transformers itself."""
    generic = sys.modules.get("transformers.utils.generic")
    found = getattr(generic, "ModelOutput", None)
    return found if isinstance(found, type) else None


def is_model_output(value: Any) -> bool:
    kind = model_output_type()
    return kind is not None and isinstance(value, kind)


def loss_of(output: Any) -> torch.Tensor | None:
    """The loss a model computed itself: `output["loss"]` or `output.loss` (a ModelOutput leaves the
    key out when it computed none)."""
    found = output.get("loss") if isinstance(output, Mapping) else getattr(output, "loss", None)
    return found if isinstance(found, torch.Tensor) else None


def logits_of(output: Any) -> Any:
    """What a metric reads from a model's output: its `logits` where it is a mapping that has them
    (a ModelOutput), else the output itself."""
    if isinstance(output, Mapping) and isinstance(output.get("logits"), torch.Tensor):
        return output["logits"]
    return output


def forward_takes(model: Any, name: str) -> bool:
    """Whether the model's forward names a parameter `name` (Hugging Face's models name `labels`, and
    compute their loss from it); a `**kwargs` catch-all does not count."""
    try:
        parameters = inspect.signature(model.forward).parameters
    except (AttributeError, TypeError, ValueError):
        return False
    found = parameters.get(name)
    return found is not None and found.kind in (found.POSITIONAL_OR_KEYWORD, found.KEYWORD_ONLY)


def _no_loss(output: Any, key: str | None) -> str:
    kind = type(output).__name__
    if key is not None:
        return (
            f"the model's forward takes {key!r}, so the whole batch goes to it, but it returned a {kind} without"
            " a loss: give loss=(output, target) -> loss or step=(model, batch) -> loss"
        )
    return (
        f"the model returned a {kind} without a loss: put the labels in a dict batch under a key its forward"
        " takes (labels), or give loss=(output, target) -> loss (on output.logits) or step=(model, batch) -> loss"
    )


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
    target stay inside the step; only the loss comes out) and for a model that computes its own loss
    (`model_loss_key`: the batch key its forward takes the target under; the output is its logits).
    `loss_given`: whether `loss_fn` is the user's (else the default the target's dtype chose, which a
    ModelOutput cannot take)."""

    loss_fn: Callable[..., Any] | None
    step_fn: Callable[..., Any] | None
    metric_fn: Callable[..., float] | None
    loss_name: str
    metric_name: str | None
    model_loss_key: str | None = None
    loss_given: bool = True

    @property
    def has_metric(self) -> bool:
        return self.metric_fn is not None

    def __call__(self, model: nn.Module, batch: Any) -> tuple[torch.Tensor, Any, Any]:
        if self.step_fn is not None:
            loss = self.step_fn(model, batch)
            if isinstance(loss, Mapping) and "loss" in loss:  # Lightning's training_step may return {"loss": ...}
                loss = loss["loss"]
            return check_loss(loss, "step"), None, None
        if self.model_loss_key is not None:
            output = model(**batch)
            own, target = loss_of(output), batch[self.model_loss_key]
            if own is None and isinstance(output, torch.Tensor) and self.loss_fn is not None:
                # a forward that takes its target as an input (teacher forcing) and returns logits
                return check_loss(self.loss_fn(output, target), "loss"), output, target
            if own is None:
                raise JobError(_no_loss(output, self.model_loss_key))
            return check_loss(own, "model"), logits_of(output), target
        args, kwargs, target = split_batch(batch)
        output = model(*args, **kwargs)
        if not self.loss_given and is_model_output(output):
            raise JobError(_no_loss(output, None))
        assert self.loss_fn is not None
        return check_loss(self.loss_fn(output, target), "loss"), output, target

    def metric(self, output: Any, target: Any) -> float | None:
        if self.metric_fn is None or output is None:
            return None
        output = logits_of(output)
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


def resolve_objective(job: Any, first_batch: Any, model: Any = None) -> Objective:
    """The job's loss, step and metric, with the defaults the first batch's target decides. A dict
    batch whose target key `model`'s forward takes goes to the model whole, and the loss is the one
    the model returns (a Hugging Face model with its `labels`)."""
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
    if model is not None and isinstance(first_batch, Mapping):
        key = next((k for k in TARGET_KEYS if k in first_batch), None)
        if key is not None and forward_takes(model, key):
            fallback, _name = default_loss(first_batch[key])  # for a forward that returns plain logits
            own = f"the model's own loss ({type(model).__name__}(**batch).loss, {key} in the batch)"
            return Objective(fallback, None, metric_fn, own, metric_name, model_loss_key=key, loss_given=False)
    try:
        target = split_batch(first_batch)[2]
    except JobError as exc:
        raise JobError(f"{exc.problem} (batch: {describe_batch(first_batch)})") from None
    loss_fn, loss_name = default_loss(target)
    return Objective(loss_fn, None, metric_fn, loss_name, metric_name, loss_given=False)


def explain_failure(job_title: str, batch: Any, exc: BaseException) -> JobError:
    """One error for a first batch that failed: the model, the batch's structure and the exception."""
    if isinstance(exc, JobError):
        return JobError(f"{job_title}: {exc.problem} (batch: {describe_batch(batch)})")
    return JobError(f"{job_title}: the first batch {describe_batch(batch)} failed: {describe_exception(exc)}")
