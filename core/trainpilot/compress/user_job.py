"""A user's `trainpilot.Job` as compression reads it: a classifier whose dense model can be built
afresh, and its data as in-memory `(X, y)` with float inputs and integer class labels.

Compression has its own training recipe (budgets, warm restarts, distillation from the dense model:
finetune.py) and measures accuracy, so it takes from a job only what that recipe needs: the
model, the data and the promise that accuracy is what counts (`metric="accuracy"`). Everything else
a job may carry (its loss, optimizer, scheduler, validation data) is named in the report's notes as
not used, rather than silently dropped. A `Dataset` (or a `DataLoader`'s) is read into memory once,
item by item and collated as the job collates, so each of the search's hundreds of fine-tune steps
is one index into tensors, as for the zoo's data.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import nn

from trainpilot.errors import JobError, describe_exception
from trainpilot.job.spec import Job

LOAD_CHUNK = 256  # samples collated at a time while a Dataset is read into memory


@dataclass(frozen=True)
class CompressibleJob:
    name: str  # the job's title: what the report and the export directory are called
    reference: str | None  # `file.py:make_job` when the job came from a file (the export records it)
    data: Any  # the whole data set, in memory (job.batches.TensorPairs or a data.Dataset)
    make_model: Callable[[], nn.Module]  # a fresh dense model, its initial weights
    num_classes: int  # the model's logits per sample
    notes: tuple[str, ...]

    @property
    def model_document(self) -> dict[str, Any]:
        """What plan.json records as the model: enough for load_exported to rebuild it."""
        return {"job": self.reference, "name": self.name}


def compressible_job(job: Job | str) -> CompressibleJob:
    """`job` (or `file.py:make_job`) checked for compression, or one JobError saying what is missing."""
    from trainpilot.job.batches import MapData, TensorPairs, resolve_data

    reference = None
    if isinstance(job, str):
        from trainpilot.job.job_file import absolute_reference, load_job

        reference = absolute_reference(job)
        job = load_job(job)
    if job.metric != "accuracy":
        shown = getattr(job.metric, "__name__", repr(job.metric))
        raise JobError(
            f"{job.title}: compress needs metric='accuracy' (it keeps the pruned model's accuracy within"
            f" --max-accuracy-drop); this job's metric is {shown}"
        )
    data, _taken = resolve_data(job.data, collate_fn=job.collate_fn)
    if len(data) == 0:
        raise JobError(f"{job.title}: the data set is empty")
    if isinstance(data, MapData):
        data = _in_memory(job.title, data)
    X, y = data.X, data.y
    dtype = X.dtype if isinstance(X, torch.Tensor) else np.asarray(X[:1]).dtype
    if not (dtype.is_floating_point if isinstance(dtype, torch.dtype) else np.issubdtype(dtype, np.floating)):
        raise JobError(
            f"{job.title}: compress needs float inputs (it times each model on random ones); this job's inputs are"
            f" {str(dtype).removeprefix('torch.')}"
        )
    labels = torch.as_tensor(np.asarray(y[:]))
    if labels.dtype.is_floating_point or labels.dtype == torch.bool or labels.ndim != 1:
        raise JobError(
            f"{job.title}: compress needs one integer class label per sample as the target (accuracy);"
            f" got {str(labels.dtype).removeprefix('torch.')} of shape {tuple(labels.shape)}"
        )
    make_model = _model_factory(job)
    num_classes = _logits(job.title, make_model(), data)
    highest = int(labels.max())
    if highest >= num_classes:
        raise JobError(
            f"{job.title}: the model gives {num_classes} logits per sample, but the labels go up to {highest}"
        )
    if isinstance(data, TensorPairs):
        data = TensorPairs(data.X, labels.long(), data.source)
    return CompressibleJob(job.title, reference, data, make_model, num_classes, _unused(job))


def _in_memory(title: str, data: Any) -> Any:
    """A map-style Dataset read into memory as `(X, y)`: its batches must be (inputs, target)."""
    from trainpilot.job.batches import TensorPairs
    from trainpilot.job.objective import describe_batch

    xs, ys = [], []
    for start in range(0, len(data), LOAD_CHUNK):
        try:
            batch = data.batch(np.arange(start, min(start + LOAD_CHUNK, len(data))))
        except Exception as exc:
            raise JobError(f"{title}: loading the data failed: {describe_exception(exc)}") from exc
        if not (
            isinstance(batch, (tuple, list))
            and len(batch) == 2
            and all(isinstance(part, torch.Tensor) for part in batch)
        ):
            raise JobError(
                f"{title}: compress needs batches (inputs, target) of two tensors;"
                f" this job's are {describe_batch(batch)}"
            )
        xs.append(batch[0])
        ys.append(batch[1])
    return TensorPairs(torch.cat(xs), torch.cat(ys), data.source)


def _model_factory(job: Job) -> Callable[[], nn.Module]:
    """A fresh dense model each call. A module given as such is copied now, before anything trains
    it: compression trains the dense model from these initial weights."""
    if isinstance(job.model, nn.Module):
        initial = copy.deepcopy(job.model)
        return lambda: copy.deepcopy(initial)
    from trainpilot.job.prepare import build_from

    return lambda: build_from(job)


def _logits(title: str, model: nn.Module, data: Any) -> int:
    """Logits per sample of the model on two real samples: a classifier maps (N, ...) to (N, classes)."""
    x = torch.as_tensor(np.asarray(data.X[:2], dtype=np.float32))
    was = model.training
    model.eval()
    try:
        with torch.no_grad():
            out = model(x)
    except Exception as exc:
        raise JobError(f"{title}: the model cannot take the data's inputs: {describe_exception(exc)}") from exc
    finally:
        model.train(was)
    if not isinstance(out, torch.Tensor) or out.ndim != 2 or out.shape[1] < 2:
        shape = tuple(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__
        raise JobError(
            f"{title}: compress needs a classifier that maps a batch to logits (N, classes >= 2); got {shape}"
        )
    return int(out.shape[1])


def _unused(job: Job) -> tuple[str, ...]:
    given = [name for name in ("loss", "optimizer", "scheduler") if getattr(job, name) is not None]
    notes = []
    if given:
        notes.append(
            f"the job's {', '.join(given)} {'is' if len(given) == 1 else 'are'} not used: compression trains and"
            " fine-tunes with its own recipe (cross-entropy, Adam, warm restarts, distillation from the dense model)"
        )
    if job.val_data is not None:
        notes.append("the job's val_data is not used: compression holds out its validation and test splits from data")
    return tuple(notes)
