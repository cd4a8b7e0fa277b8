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
from trainpilot.job.workload import WorkloadProfile, _kind, _learnable_layers, _recurrent_flops, flop_counter


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
    layers = _learnable_layers(model)
    kinds: dict[str, int] = {}
    for layer in layers:
        kinds[_kind(layer)] = kinds.get(_kind(layer), 0) + 1
    params = sum(p.numel() for p in model.parameters())
    if params == 0:
        raise JobError(f"{name}: the model has no parameters to train")
    if not any(p.requires_grad for p in model.parameters()):
        raise JobError(f"{name}: none of the model's parameters requires grad; nothing would train")
    weight_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
    activation_bytes = 0

    def count_output(_m: nn.Module, _inp: Any, out: Any) -> None:
        nonlocal activation_bytes
        for t in out if isinstance(out, (tuple, list)) else (out,):
            if isinstance(t, torch.Tensor):
                activation_bytes += t.numel() * t.element_size()

    hooks = [m.register_forward_hook(count_output) for m in model.modules() if not list(m.children())]
    was_training = model.training
    model.train()
    try:
        with flop_counter() as counter:
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
        for h in hooks:
            h.remove()
        model.zero_grad(set_to_none=True)
        model.train(was_training)

    x = first_tensor(batch)
    input_shape = tuple(int(d) for d in x.shape[1:]) if x is not None and x.ndim > 1 else (1,)
    recurrent_steps = input_shape[0] if kinds.get("recurrent") and len(input_shape) >= 2 else 0
    rnn_fwd = _recurrent_flops(model, recurrent_steps) * probe if recurrent_steps else 0.0
    forward_flops += rnn_fwd
    total_flops += rnn_fwd * 3  # backward of a matmul costs about twice its forward
    num_classes = int(output.shape[1]) if isinstance(output, torch.Tensor) and output.ndim == 2 else 0
    n_layers = max(len(layers), 1)
    return WorkloadProfile(
        model=name,
        params=params,
        layers=len(layers),
        depth=len(layers),
        has_conv=kinds.get("conv", 0) > 0,
        has_rnn=kinds.get("recurrent", 0) > 0,
        avg_layer_size=params / n_layers,
        layer_kinds=kinds,
        flops_per_sample=total_flops / probe,
        forward_flops_per_sample=forward_flops / probe,
        weight_bytes=weight_bytes,
        activation_bytes_per_sample=activation_bytes // probe,
        input_shape=input_shape if math.prod(input_shape) > 0 else (1,),
        num_classes=num_classes,
        dataset_size=int(dataset_size),
        batch_size=int(batch_size),
        epochs=int(epochs),
    )
