"""A `Job`: what the user trains — their model, their data, their loss or training step, their
optimizer and metric. The zoo and the path formats are jobs too (`zoo_job`), so one loop, one
profile and one planner serve both.

A Job only holds and checks what it was given; `prepare.py` resolves it (data split, profile on a
real batch) and `objective.py` says how one batch becomes a loss.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from trainpilot.errors import JobError

METRICS = ("accuracy",)
LOSS_REDUCTIONS = ("mean", "sum")  # what a job's loss does over a batch's samples (Job.loss_reduction)


@dataclass(eq=False)
class Job:
    """One training job.

    model:      an `nn.Module` (trained in place) or a zero-argument factory (a fresh model per fit).
    data:       a `torch.utils.data.Dataset`, a `DataLoader` (its dataset, batch size, sampler and
                collate are taken; its worker count becomes the agent's choice unless `workers` pins
                it), a pair `(X, y)` of tensors or arrays, or a path TrainPilot reads (see docs/).
    loss:       `(output, target) -> scalar tensor`; default cross-entropy for integer targets, MSE
                for float ones. Or `step`: `(model, batch) -> loss` for anything else.
    optimizer:  `params -> torch.optim.Optimizer` (default Adam at the run's learning rate, 1e-3);
    scheduler:  `optimizer -> LR scheduler`, stepped once per epoch.
    metric:     "accuracy", a callable `(output, target) -> float`, or None (validation loss only).
    val_data:   held-out data in any `data` form; None holds out 10 % of `data`.
    workers:    pin the DataLoader's worker count (None: the agent chooses it with the threads).
    loss_reduction: "mean" (default: PyTorch's losses, a step returning a batch mean) or "sum":
                what the loss does over a batch's samples. Ranks and split plans weight each
                share's loss by it, so a step on shares is the step on the whole batch.
    name:       what the trace, the history and --json call it (default: the model's class name).
    """

    model: Any
    data: Any
    loss: Callable[..., Any] | None = None
    step: Callable[..., Any] | None = None
    optimizer: Callable[..., Any] | None = None
    batch_size: int = 64
    val_data: Any = None
    metric: str | Callable[..., Any] | None = None
    collate_fn: Callable[..., Any] | None = None
    scheduler: Callable[..., Any] | None = None
    workers: int | None = None
    name: str | None = None
    loss_reduction: str = "mean"
    zoo: Any = field(default=None, repr=False)  # the ModelSpec of a job built from the zoo (zoo_job)

    def __post_init__(self) -> None:
        check_job(self)

    @property
    def title(self) -> str:
        """The job's name as runs, the history and the trace show it."""
        if self.name:
            return self.name
        model = self.model
        try:
            from torch import nn

            if isinstance(model, nn.Module):
                return type(model).__name__
        except ImportError:  # pragma: no cover - torch is a dependency
            pass
        return getattr(model, "__name__", type(model).__name__)


def check_job(job: Job) -> None:
    """What can be checked without running anything: each field's kind. A JobError names the field."""
    from torch import nn

    if not isinstance(job.model, nn.Module) and not callable(job.model):
        raise JobError(
            f"model must be a torch.nn.Module or a function that returns one, got {type(job.model).__name__}"
        )
    if isinstance(job.model, type) and not issubclass(job.model, nn.Module):
        raise JobError(f"model: the class {job.model.__name__} is not a torch.nn.Module")
    if job.data is None:
        raise JobError("data is missing: give a Dataset, a DataLoader, a pair (X, y) or a path")
    if job.loss is not None and job.step is not None:
        raise JobError("give loss or step, not both (step computes the loss itself)")
    for name in ("loss", "step", "optimizer", "collate_fn", "scheduler"):
        value = getattr(job, name)
        if value is not None and not callable(value):
            raise JobError(f"{name} must be callable, got {type(value).__name__}")
    if isinstance(job.loss, type):
        raise JobError(f"loss: pass an instance ({job.loss.__name__}()), not the class")
    if isinstance(job.batch_size, bool) or not isinstance(job.batch_size, int) or job.batch_size < 1:
        raise JobError(f"batch_size must be a whole number >= 1, got {job.batch_size!r}")
    if isinstance(job.metric, str) and job.metric not in METRICS:
        raise JobError(f"metric must be one of {', '.join(METRICS)}, a callable or None, got {job.metric!r}")
    if job.metric is not None and not isinstance(job.metric, str) and not callable(job.metric):
        raise JobError(f"metric must be 'accuracy', a callable or None, got {type(job.metric).__name__}")
    if job.metric is not None and job.step is not None:
        raise JobError("metric needs the model's output and target, which a step hides; use loss= with a metric")
    if job.loss_reduction not in LOSS_REDUCTIONS:
        raise JobError(
            f"loss_reduction must be 'mean' or 'sum' (what the loss does over a batch), got {job.loss_reduction!r}"
        )
    if job.workers is not None and (
        isinstance(job.workers, bool) or not isinstance(job.workers, int) or job.workers < 0
    ):
        raise JobError(f"workers must be a whole number >= 0, got {job.workers!r}")


def zoo_job(spec: Any, dataset: Any, *, batch_size: int) -> Job:
    """A zoo model on an in-memory `data.Dataset` (the path formats, the demo): cross-entropy,
    accuracy, Adam — what TrainPilot trained before jobs were the user's."""
    from trainpilot.job.models import build_model

    def make_model() -> Any:
        return build_model(spec, dataset.sample_shape, dataset.num_classes)

    make_model.__name__ = spec.name
    return Job(make_model, dataset, metric="accuracy", batch_size=batch_size, name=spec.name, zoo=spec)
