"""Plan a job without training: build and profile the model on the dataset exactly as a session
would, observe the load, predict every plan, decide. What `trainpilot headless plan` prints.

For this machine the agent itself plans (its candidate plans, its exclusions, its trace), so the
answer is the one `headless run` would act on. For a described machine (`--hardware FILE`) the
cost model derives a calibration from the file's figures and plans for that machine's plans.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from trainpilot.plans import Decision, PlanPrediction
from trainpilot.predict.model import DESCRIBED_MARK, CostModel

Progress = Callable[[float, str], None]


def profile_job(
    model: str | dict[str, Any],
    dataset: Any,
    *,
    epochs: int = 3,
    batch_size: int = 64,
    val_fraction: float = 0.1,
    seed: int = 0,
    precisions: tuple[str, ...] = (),
    memory_format: str = "auto",
) -> tuple[Any, Any]:
    """(profile, dataset) as a run prepares them (job/prepare.py)."""
    from trainpilot.job.prepare import prepare_job

    job = prepare_job(
        model,
        dataset,
        epochs=epochs,
        batch_size=batch_size,
        val_fraction=val_fraction,
        seed=seed,
        precisions=precisions,
        memory_format=memory_format,
    )
    return job.profile, job.dataset


def keeping_random_state(plan: Callable[..., Any]) -> Callable[..., Any]:
    """`plan` leaving the caller's torch and numpy random state as it was: preparing a job seeds
    both (a run starts from seeded weights) and calibrating draws from them, which planning alone
    must not leave behind (a Lightning user's seeds, a script's own draws)."""
    import functools

    @functools.wraps(plan)
    def planned(*args: Any, **kwargs: Any) -> Any:
        from trainpilot.job.prepare import random_state_kept

        with random_state_kept():
            return plan(*args, **kwargs)

    return planned


def _bounds(p: PlanPrediction) -> dict[str, Any]:
    """The prediction's 80 % interval (interval.py) as the --json keys every predicted time has."""
    bounds = p.detail.get("interval") or {}
    return {
        "predicted_low_s": bounds.get("low_s"),
        "predicted_high_s": bounds.get("high_s"),
        "interval_kind": bounds.get("kind"),
    }


def _plan_row(p: PlanPrediction, chosen: Decision) -> dict[str, Any]:
    return {
        **p.plan.to_dict(),
        "label": p.plan.label,
        "short_label": p.plan.short_label,
        "predicted_s": p.predicted_s,
        **_bounds(p),
        "excluded": p.excluded_reason,
        "source": p.source,
        "chosen": p.plan == chosen.plan,
        "relative_error": p.detail.get("relative_error"),
        "history_runs": p.detail.get("history_runs"),
        "per_epoch_s": p.detail.get("per_epoch_s"),
        "energy_j": p.detail.get("energy_j"),
        "power_w": p.detail.get("power_w"),
        "energy_source": p.detail.get("energy_source"),
    }


@keeping_random_state
def plan_job(
    model: str | dict[str, Any],
    dataset: str | None,
    *,
    epochs: int = 3,
    batch_size: int = 64,
    hardware_file: str | Path | None = None,
    home: str | Path | None = None,
    auto_calibrate: bool = True,
    progress: Progress | None = None,
    objective: str = "time",
    job: Any = None,
    val_fraction: float = 0.1,
    memory_format: str = "auto",
    precision: str = "fp32",
    nproc: int | None = None,
) -> dict[str, Any]:
    """Everything `headless plan --json` prints: {"chosen", "plans", "observation", ...}.
    `objective`: time | energy | edp, what the choice minimises (energy/objective.py). `job`: the
    user's own trainpilot.Job (or `file.py:make_job`), planned instead of `model` on `dataset`.
    `nproc`: also predict the run on that many local ranks against the best single process
    ("ranks": parallel/rank_plans.py's RankChoice)."""
    from trainpilot.agent.plan_summary import summarize
    from trainpilot.energy import PlanPower, annotate, check_objective, choose, figures_text
    from trainpilot.machine.monitor import measure_load

    check_objective(objective)
    from trainpilot.agent.step_settings import check_choices, cpu_precisions
    from trainpilot.errors import ConfigError
    from trainpilot.machine.allocator import keep_freed_memory

    check_choices(memory_format, precision, names=("memory_format", "precision"))
    if hardware_file is not None and (memory_format, precision) != ("auto", "fp32"):
        raise ConfigError(
            "a described machine (--hardware) is planned contiguous and in fp32: its figures measure neither"
        )
    precisions = cpu_precisions(precision)

    keep_freed_memory()  # as a run sets it before anything is timed: the job's step probe runs as its steps will
    if nproc is not None and hardware_file is not None:
        raise ConfigError(
            "ranks are predicted on this machine (its loopback and launches); a described machine has neither"
        )
    if nproc is not None and nproc < 2:
        raise ConfigError(f"a multi-rank plan has at least 2 ranks, got nproc={nproc}")

    prepare_started = time.perf_counter()
    if job is not None:
        from trainpilot.job.prepare import prepare

        if isinstance(job, str):
            from trainpilot.job.job_file import load_job

            job = load_job(job)
        from trainpilot.machine.contention import ExternalCpuMeter

        profile = prepare(
            job,
            epochs=epochs,
            val_fraction=val_fraction,
            meter=ExternalCpuMeter,
            precisions=precisions,
            memory_format=memory_format,
        ).profile
    else:
        profile, _data = profile_job(
            model, dataset, epochs=epochs, batch_size=batch_size, precisions=precisions, memory_format=memory_format
        )
    prepare_s = time.perf_counter() - prepare_started  # what each rank of a launch pays again
    calibrated_now = False
    if hardware_file is not None:
        from trainpilot.machine.target_profiles import resolve_target

        target = resolve_target(hardware_file)  # a .toml path, or a shipped profile's name
        cost = CostModel.open(home, hardware=target)
        load = measure_load(0.05)  # only to fill the protocol; a described machine is assumed idle
        for plan in cost.plans():  # a first pass imports what the predictions need (not thinking)
            cost.predict(profile, plan, load)
        start = time.perf_counter()
        power = PlanPower.for_target(target)
        predictions = [annotate(cost.predict(profile, plan, load), power) for plan in cost.plans()]
        decision = choose(predictions, objective, cost.decide(profile, predictions, load, {}))
        thinking = time.perf_counter() - start
        observation: dict[str, Any] = {
            "described_machine": target.to_dict(),
            "assumed_load": "idle",
            "note": DESCRIBED_MARK,
        }
        trace = [
            f"{p.plan.label}: "
            + (
                f"predicted {figures_text(p)} ({p.detail.get('energy_source')})"
                if p.predicted_s is not None
                else f"excluded — {p.excluded_reason}"
            )
            for p in predictions
        ] + list(decision.reasoning)
        summary = summarize(predictions, decision, objective).to_dict()
    else:
        from trainpilot.agent.orchestrator import Agent, observe_hardware
        from trainpilot.backends import probe
        from trainpilot.predict.auto import ensure_calibrated

        hardware = probe()
        cost = CostModel.open(home, hardware=hardware)
        if auto_calibrate:
            calibrated_now = ensure_calibrated(cost, progress)
        agent = Agent(
            predictor=cost, hardware=hardware, objective=objective, memory_format=memory_format, precision=precision
        )
        load = measure_load(0.3)
        observation = observe_hardware(hardware, load)
        agent.observe(observation, profile)
        result = agent.plan(profile, load, observation)
        predictions, decision, thinking = list(result.predictions), result.decision, result.seconds
        trace = [s.text for s in result.steps]
        summary = next(s.data["summary"] for s in reversed(result.steps) if "summary" in s.data)
    chosen_prediction = next((p for p in predictions if p.plan == decision.plan), None)
    ranks = None
    if nproc is not None:
        from trainpilot.parallel.rank_plans import choose_ranks_or_single, local_ranks

        specs = local_ranks(nproc, hardware.logical_cpus)
        ranks = choose_ranks_or_single(cost, profile, specs, load, prepare_s=prepare_s).to_dict()
    return {
        "chosen": {
            **decision.plan.to_dict(),
            "label": decision.plan.label,
            "short_label": decision.plan.short_label,
            "predicted_s": decision.predicted_s,
            **(
                _bounds(chosen_prediction) if chosen_prediction else {"predicted_low_s": None, "predicted_high_s": None}
            ),
            "confidence": decision.confidence,
            "margin": decision.margin,
            "policy": decision.policy,
            "source": chosen_prediction.source if chosen_prediction else None,
            "energy_j": chosen_prediction.detail.get("energy_j") if chosen_prediction else None,
            "energy_source": chosen_prediction.detail.get("energy_source") if chosen_prediction else None,
        },
        "objective": objective,
        "plans": [_plan_row(p, decision) for p in predictions],
        "observation": observation,
        "workload": profile.to_dict(),
        "reasoning": list(decision.reasoning),
        "summary": summary,  # what a person reads of it (agent/plan_summary.py)
        "trace": trace,
        "thinking_ms": thinking * 1000.0,
        "calibrated": cost.is_calibrated,
        "calibrated_now": calibrated_now,
        "described": cost.is_described,
        "notices": list(cost.notices),
        "ranks": ranks,
    }
