"""The plan a host loop runs, and the agent's prediction for it: a running torch device (with the
process's threads and the DataLoader's workers) as a plan, the planning report's row for that plan,
and the best row a host can run by the user's objective.

The report ("plans" of `trainpilot.plan`'s report) predicts every plan the agent weighed; a host runs
only some of them, on its own settings, so the row for what it runs is matched by device, mode,
layout and precision first, then by the nearest threads and loader workers.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from trainpilot.plans import Plan, PlanPrediction


def cuda_index(device: str | None) -> int:
    """The index of "cuda:N" (0 for "cuda" or None)."""
    _, _, index = (device or "cuda").partition(":")
    return int(index) if index else 0


def plan_of_device(
    device: Any,
    threads: int,
    loader_workers: int,
    *,
    precision: str | None = None,
    mode: str | None = None,
) -> Plan:
    """The plan a run on torch `device` is on, with the process's `threads`, its DataLoader's
    `loader_workers` (0: the training process loads the batches), its mixed `precision` ("bf16" |
    "fp16" | None) and `mode` (a CPU plan's "compiled")."""
    import torch

    dev = torch.device(device)
    workers = loader_workers or None
    if dev.type == "cpu":
        plan = Plan("cpu", threads=threads, loader_workers=workers, mode=mode)
    elif dev.type == "cuda":
        plan = Plan("cuda", device=f"cuda:{dev.index or 0}", loader_workers=workers)
    elif dev.type == "mps":
        plan = Plan("mps", device="mps", loader_workers=workers)
    else:
        plan = Plan(dev.type, device=str(dev), loader_workers=workers)
    return plan.with_settings(precision=precision)


def _device_key(plan: Plan) -> tuple[str, str | None, str | None, str | None, str | None]:
    """What tells two plans' steps apart: the backend, its mode, the CUDA device, layout, precision."""
    device = f"cuda:{cuda_index(plan.device)}" if plan.backend == "cuda" else None
    return plan.backend, plan.mode, device, plan.memory_format, plan.precision


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
    """The agent's predicted row for `plan`: the same device, mode, layout and precision with the
    same threads and loader workers, else the nearest the agent weighed there (threads first, then
    workers)."""
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


def best_row(rows: Sequence[dict[str, Any]], objective: str, runnable: Callable[[Plan], bool]) -> dict[str, Any] | None:
    """The row a host can run (`runnable`) that is best by `objective`, by time where no row has the
    objective's figures (None: no such row predicted)."""
    from trainpilot.energy.objective import rank

    predictions = [prediction_of(r) for r in rows if runnable(Plan.from_dict(r))]
    ranked = rank(predictions, objective) or rank(predictions, "time")
    if not ranked:
        return None
    best = ranked[0].plan
    return next(r for r in rows if Plan.from_dict(r) == best)
