"""The workload profile of any job, measured on a real batch through the job's own forward and
loss (or step), backward included: FLOPs from `torch.utils.flop_counter`, parameter and activation
bytes, the layer kinds the roofline reads. A first batch that fails is one JobError naming the
model, the batch's structure and shapes, and the exception."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import torch
from torch import nn

from trainpilot.errors import JobError
from trainpilot.job.objective import Objective, batch_size_of, explain_failure
from trainpilot.job.workload import ActivationMeter, WorkloadProfile, assemble_profile, flop_counter, layer_census


def first_tensor(batch: Any) -> torch.Tensor | None:
    """The first tensor of a batch (its model input, in a `(x, ..., y)` or dict batch)."""
    if isinstance(batch, torch.Tensor):
        return batch
    items = list(batch.values()) if isinstance(batch, Mapping) else batch if isinstance(batch, (tuple, list)) else []
    for item in items:
        found = first_tensor(item)
        if found is not None:
            return found
    return None


def profile_job(
    model: nn.Module,
    batch: Any,
    objective: Objective,
    *,
    name: str,
    dataset_size: int,
    batch_size: int,
    epochs: int,
) -> WorkloadProfile:
    """Profile `model` on `batch` (a few samples collated as training collates them)."""
    probe = batch_size_of(batch) or 1
    params = list(model.parameters())
    if not params:
        raise JobError(f"{name}: the model has no parameters to train")
    if not any(p.requires_grad for p in params):
        raise JobError(f"{name}: none of the model's parameters requires grad; nothing would train")
    was_training = model.training
    model.train()
    try:
        with flop_counter() as counter, ActivationMeter(model) as activations:
            loss, output, _target = objective(model, batch)
            forward_flops = counter.get_total_flops()
            if not torch.isfinite(loss.detach()):
                raise JobError(f"the loss is {float(loss.detach())} on the first batch (check the data and the loss)")
            if not loss.requires_grad:
                raise JobError("the loss does not depend on the model's parameters (it has no gradient)")
            loss.backward()
            total_flops = counter.get_total_flops()
    except Exception as exc:
        raise explain_failure(name, batch, exc) from exc
    finally:
        model.zero_grad(set_to_none=True)
        model.train(was_training)

    x = first_tensor(batch)
    input_shape = tuple(int(d) for d in x.shape[1:]) if x is not None and x.ndim > 1 else (1,)
    recurrent = layer_census(model)[1].get("recurrent")
    return assemble_profile(
        model,
        name=name,
        probe=probe,
        forward_flops=forward_flops,
        total_flops=total_flops,
        activation_bytes=activations.bytes,
        input_shape=input_shape if math.prod(input_shape) > 0 else (1,),
        recurrent_steps=input_shape[0] if recurrent and len(input_shape) >= 2 else 0,
        num_classes=int(output.shape[1]) if isinstance(output, torch.Tensor) and output.ndim == 2 else 0,
        dataset_size=dataset_size,
        batch_size=batch_size,
        epochs=epochs,
    )
