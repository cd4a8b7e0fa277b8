"""How a multi-rank plan is written: the rank's own plan (backend, threads per rank) with mode
"ddp-N". The history keys CPU runs by (threads, mode), so a 2-rank run never corrects the
prediction of a single-process plan, and needs no new column."""

from __future__ import annotations

from trainpilot.plans import Plan

PREFIX = "ddp-"


def ddp_plan(rank_plan: Plan, world_size: int) -> Plan:
    return (
        Plan(rank_plan.backend, threads=rank_plan.threads, device=rank_plan.device, mode=f"{PREFIX}{world_size}")
        .with_settings(rank_plan.memory_format, rank_plan.precision)
        .with_loader(rank_plan.loader_workers)
    )


def ddp_world_size(plan: Plan) -> int | None:
    """N for a "ddp-N" plan, None for any other plan."""
    mode = plan.mode or ""
    if not mode.startswith(PREFIX) or not mode[len(PREFIX) :].isdigit():
        return None
    return int(mode[len(PREFIX) :])
