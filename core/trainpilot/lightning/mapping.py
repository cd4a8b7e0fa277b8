"""What runs where: a TrainPilot plan as a Lightning Trainer's `accelerator` and `devices`, the plan
a running Trainer is on, and the agent's prediction for that plan.

A single-device Trainer runs the eager CPU plan (its threads are the process's torch threads, which
Lightning leaves alone), one CUDA device, or MPS. The split, Core ML and torch.compile plans are
TrainPilot's own training loops: Lightning cannot run them as they were predicted. Nor does a Trainer
put a module in channels_last or under autocast on TrainPilot's say, so Lightning is planned in
PyTorch's layout and fp32 (its own `precision=` stays the user's choice).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from trainpilot.plans import Plan, PlanPrediction

LIGHTNING_BACKENDS = ("cpu", "cuda", "mps")


def runnable(plan: Plan) -> bool:
    """Whether a single-device Lightning Trainer runs `plan` as TrainPilot predicted it."""
    return plan.backend in LIGHTNING_BACKENDS and plan.mode is None and not plan.memory_format and not plan.precision


def cuda_index(device: str | None) -> int:
    """The index of "cuda:N" (0 for "cuda" or None)."""
    _, _, index = (device or "cuda").partition(":")
    return int(index) if index else 0


def trainer_arguments(plan: Plan) -> dict[str, Any]:
    """`Trainer(**trainer_arguments(plan))`: CPU and MPS as one device (for the CPU, Lightning's
    `devices` counts processes), CUDA as the list of the one device index."""
    if not runnable(plan):
        raise ValueError(f"a Lightning Trainer cannot run the plan {plan.label}")
    if plan.backend == "cuda":
        return {"accelerator": "cuda", "devices": [cuda_index(plan.device)]}
    return {"accelerator": plan.backend, "devices": 1}


def plan_of_device(device: Any, threads: int, loader_workers: int) -> Plan:
    """The plan a run on torch `device` is on, with the process's `threads` and its DataLoader's
    `loader_workers` (0: the training process loads the batches)."""
    import torch

    dev = torch.device(device)
    workers = loader_workers or None
    if dev.type == "cpu":
        return Plan("cpu", threads=threads, loader_workers=workers)
    if dev.type == "cuda":
        return Plan("cuda", device=f"cuda:{dev.index or 0}", loader_workers=workers)
    if dev.type == "mps":
        return Plan("mps", device="mps", loader_workers=workers)
    return Plan(dev.type, device=str(dev), loader_workers=workers)


def _device_key(plan: Plan) -> tuple[str, str | None, str | None]:
    """What tells two plans' devices apart: the backend, its mode and, for CUDA, the device."""
    device = f"cuda:{cuda_index(plan.device)}" if plan.backend == "cuda" else None
    return plan.backend, plan.mode, device


def prediction_of(row: dict[str, Any]) -> PlanPrediction:
    """One row of the planning report's "plans" as the prediction it was made from."""
    return PlanPrediction(
        Plan.from_dict(row),
        row.get("predicted_s"),
        row.get("excluded"),
        row.get("source") or "estimate",
        {"energy_j": row.get("energy_j")},
    )


def row_for(rows: Sequence[dict[str, Any]], plan: Plan) -> dict[str, Any] | None:
    """The agent's predicted row for `plan`: the same device with the same threads and loader
    workers, else the nearest the agent weighed on that device (threads first, then workers)."""
    same = [
        r
        for r in rows
        if r.get("predicted_s") is not None
        and not r.get("excluded")
        and _device_key(Plan.from_dict(r)) == _device_key(plan)
    ]
    if not same:
        return None

    def distance(row: dict[str, Any]) -> tuple[int, int]:
        return (
            abs((row.get("threads") or 0) - (plan.threads or 0)),
            abs((row.get("loader_workers") or 0) - (plan.loader_workers or 0)),
        )

    return min(same, key=distance)


def best_runnable(rows: Sequence[dict[str, Any]], objective: str) -> dict[str, Any] | None:
    """The row a Lightning Trainer can run that is best by `objective` (None: no such row predicted)."""
    from trainpilot.energy.objective import rank

    predictions = [prediction_of(r) for r in rows if runnable(Plan.from_dict(r))]
    ranked = rank(predictions, objective) or rank(predictions, "time")
    if not ranked:
        return None
    best = ranked[0].plan
    return next(r for r in rows if Plan.from_dict(r) == best)
