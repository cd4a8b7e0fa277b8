"""A launch of N local ranks, predicted for the run it starts as `plan --nproc N` predicts it.

`plan --nproc` predicts the ranks' run from this machine's calibration, its loopback link with the
start-up real launches measured (launch_cost.py), the job's preparation and the load it observed
(rank_plans.predict_ranks). A run on ranks makes the same prediction, in each rank once it has
prepared the job, so its epoch lines, its result and its history row carry it:

- before the ranks start, the launching process readies what the prediction needs, so that no rank
  measures anything inside its group (launch_cost.ready_to_predict): the machine calibrated and its
  loopback measured once (as a single process's first run quick-calibrates), and the machine's load
  now, before the ranks add theirs (a rank observing for itself would see its peers preparing);
- each rank predicts (`predict_launch`) with the job it prepared and its own preparation time.

The run's predicted and actual time are its training's, as any run's are; the start-up the launch
was predicted to add is in the result's `distributed.prediction`, beside the launch's wall time.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from trainpilot.plans import Plan, PlanPrediction
from trainpilot.units import seconds as fmt_s


@dataclass(frozen=True)
class LaunchForecast:
    prediction: PlanPrediction | None  # of the run's "ddp-N" plan; None: why_not says why
    why_not: str = ""

    def text(self) -> str:
        if self.prediction is None:
            return f"no prediction of the launch: {self.why_not}"
        d = self.prediction.detail
        return (
            f"the launch predicted {fmt_s(self.prediction.predicted_s or 0.0)}:"
            f" start-up {fmt_s(d['startup_s'])}, {fmt_s(d['per_epoch_s'])} per epoch"
        )

    def to_dict(self) -> dict[str, Any]:
        """The result's `distributed.prediction`: the launch as predicted (`run_s` with its start-up)."""
        if self.prediction is None:
            return {"run_s": None, "why_not": self.why_not}
        d = self.prediction.detail
        keys = ("startup_s", "per_epoch_s", "warmup_s", "startup_source", "busy_cores", "shares", "step_s")
        return {"run_s": self.prediction.predicted_s, **{k: d[k] for k in keys}}


def launch_load(observed_busy_cores: float, logical_cpus: int) -> Any:
    """The load the launch is predicted under: what the launching process saw before the ranks
    started (LOAD_ENV), else (under torchrun) what this rank observed."""
    from trainpilot.machine.contention import ExternalCpu
    from trainpilot.parallel.launch_cost import LOAD_ENV

    busy = observed_busy_cores
    try:
        busy = float(os.environ[LOAD_ENV])
    except (KeyError, ValueError):
        pass
    return ExternalCpu(1.0, max(busy, 0.0), 0.0).as_sample(logical_cpus)


def predict_launch(
    cost: Any,
    profile: Any,
    plan: Plan,
    rank_plan: Plan,
    *,
    world_size: int,
    local_world_size: int,
    prepare_s: float,
    observed_busy_cores: float,
) -> LaunchForecast:
    """The run on `world_size` ranks of `rank_plan` each, as `plan --nproc` predicts it, as the
    prediction of the run's `plan` (its "ddp-N" form). Never raises: a rank trains unpredicted."""
    from trainpilot.parallel.launch_cost import with_launch_startup
    from trainpilot.parallel.link import cached_loopback
    from trainpilot.parallel.rank_plans import RankSpec, predict_ranks

    if world_size != local_world_size:
        return LaunchForecast(None, "its ranks are on several machines (`plan --cluster` predicts those)")
    if rank_plan.backend != "cpu":
        return LaunchForecast(None, f"`plan --nproc` predicts ranks on the CPU, not on {rank_plan.backend}")
    if not getattr(cost, "is_calibrated", False) or getattr(cost, "is_described", False):
        return LaunchForecast(None, "this machine is not calibrated yet (`trainpilot headless calibrate`)")
    link = cached_loopback(machine_id=cost.machine_id)
    if link is None:
        return LaunchForecast(
            None, "the loopback link is not measured yet (`trainpilot headless calibrate --loopback`)"
        )
    link = with_launch_startup(link, world_size, prepare_s=prepare_s)
    load = launch_load(observed_busy_cores, cost.logical_cpus)
    try:
        multi = predict_ranks(cost, profile, [RankSpec(rank_plan)] * world_size, load, link=link)
    except (ValueError, RuntimeError) as exc:
        return LaunchForecast(None, str(exc))
    startup, warmup = multi.link.startup_s, float(multi.detail["warmup_s"])
    detail = {
        # per epoch as any plan's: without the start-up and the fresh model's first-step warm-up
        "per_epoch_s": (multi.run_s - startup - warmup) / max(int(profile.epochs), 1),
        "startup_s": startup,
        "warmup_s": warmup,
        "startup_source": multi.link.source.split("; start-up ", 1)[-1],
        "busy_cores": round(load.busy_cores, 3),
        "shares": list(multi.shares),
        "step_s": multi.step_s,
        "ranks": multi.to_dict(),
    }
    return LaunchForecast(PlanPrediction(plan, multi.run_s, source="launch", detail=detail))
