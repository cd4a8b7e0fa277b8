"""Which plan the run acts on: the agent's decision, or what the options force (--backend,
--threads, --compile, falling back to the CPU with the reason when that cannot run here); and the
plan an override or a fallback moves to."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from trainpilot.plans import COMPILED, Availability, Plan, PlanPrediction
from trainpilot.run.config import SessionConfig


@dataclass(frozen=True)
class PlanChoice:
    plan: Plan
    source: str  # agent | user | fallback | resume | launch
    reason: str
    fallback_reason: str | None = None


def act_plan(decision: Any, cfg: SessionConfig, agent: Any, profile: Any, backends: Any) -> PlanChoice:
    if cfg.backend != "auto" or cfg.threads or cfg.compile:
        choice = forced_plan(cfg, agent, profile, backends)
        plan = with_settings(choice.plan, cfg, profile, getattr(agent, "last_predictions", ()))
        return replace(choice, plan=with_loader(plan, profile, decision.plan.loader_workers))
    return PlanChoice(decision.plan, "agent", "; ".join(decision.reasoning) or "agent decision")


def with_loader(plan: Plan, profile: Any, chosen: int | None) -> Plan:
    """A plan the options forced, with the DataLoader workers the job pins or, where the agent
    chooses them, the count it chose: forcing threads or a device leaves the loading to it."""
    loader = getattr(profile, "loader", "memory")
    if plan.workers or loader == "memory" or loader == "in-process":
        return plan
    if loader == "pinned":
        return plan.with_loader(int(getattr(profile, "pinned_workers", 0) or 0) or None)
    return plan.with_loader(chosen)


def with_settings(plan: Plan, cfg: SessionConfig, profile: Any, predictions: Any) -> Plan:
    """A plan the options forced, in the layout and precision the agent predicted fastest for it
    among those allowed (forcing threads or a device leaves the settings to it); unpredicted, what
    the options ask for explicitly, else PyTorch's defaults. An explicit mixed precision that the
    forced plan's device does not run natively is a ConfigError with the device's reason."""
    from trainpilot.agent.step_settings import offers_channels_last
    from trainpilot.errors import ConfigError

    same = [
        p
        for p in predictions
        if p.predicted_s is not None and not p.excluded and p.plan.computing().with_settings() == plan.computing()
    ]
    if same:
        best = min(same, key=lambda p: p.predicted_s)
        return plan.with_settings(best.plan.memory_format, best.plan.precision)
    fmt = cfg.memory_format if cfg.memory_format != "auto" and offers_channels_last(profile) else None
    precision = cfg.precision if cfg.precision not in ("auto", "fp32") else None
    chosen = plan.with_settings(fmt, precision)
    native = runs_natively(chosen)
    if not native:
        raise ConfigError(f"--precision {precision} on {plan.label}: {native.reason}; use fp32 or auto")
    return chosen


def runs_natively(plan: Plan) -> Availability:
    """Whether the plan's precision runs natively on its device (and, for fp16, with a loss scaler:
    not on a split, whose workers return unscaled gradients)."""
    if not plan.precision:
        return Availability(True)
    from trainpilot.agent.step_settings import NO_FP16_SPLIT
    from trainpilot.machine.precision_support import native_precision

    if plan.precision == "fp16" and plan.workers:
        return Availability(False, NO_FP16_SPLIT)
    return native_precision(plan, plan.precision)


def forced_plan(cfg: SessionConfig, agent: Any, profile: Any, backends: Any) -> PlanChoice:
    name = "cpu" if cfg.backend == "auto" else cfg.backend
    backend = backends(name)
    avail = backend.availability()
    if avail:
        avail = backend.supports(profile)
    if not avail:
        threads = cfg.threads or agent.hardware.logical_cpus
        return PlanChoice(
            Plan("cpu", threads=threads),
            "fallback",
            f"{name} requested but unavailable ({avail.reason}); running on the CPU",
            f"{name} unavailable: {avail.reason}",
        )
    plans = backend.plans(agent.hardware.logical_cpus)
    if name != "cpu":
        return PlanChoice(plans[0], "user", f"requested --backend {name}")
    threads = (
        cfg.threads
        or (agent.last_plan.threads if agent.last_plan and agent.last_plan.backend == "cpu" else None)
        or agent.hardware.logical_cpus
    )
    plan = Plan("cpu", threads=threads, mode=COMPILED if cfg.compile else None)
    if cfg.compile:
        compiles = backend.supports_plan(profile, plan)
        if not compiles:
            return PlanChoice(
                Plan("cpu", threads=threads),
                "fallback",
                f"--compile requested but torch.compile cannot run here ({compiles.reason}); training eagerly",
                f"torch.compile unavailable: {compiles.reason}",
            )
    return PlanChoice(
        plan, "user", f"requested --backend cpu with {threads} thread(s)" + (", compiled" if cfg.compile else "")
    )


def plan_for(
    backend: Any,
    logical_cpus: int,
    predictions: dict[Plan, PlanPrediction],
    threads: int | None,
    mode: str | None = None,
    memory_format: str | None = None,
    precision: str | None = None,
) -> Plan:
    """The plan of `backend` to move to. For the CPU: the thread count asked for, else the one
    the agent predicted fastest (not blindly all threads), eager unless `mode` asks to compile.
    The layout and precision asked for ("contiguous", "channels_last", "fp32", "bf16"...), else
    the ones predicted fastest for that plan."""
    fmt = None if memory_format in (None, "contiguous") else memory_format
    prec = None if precision in (None, "fp32") else precision

    def allowed(p: Plan) -> bool:
        return (memory_format is None or p.memory_format == fmt) and (precision is None or p.precision == prec)

    plans = backend.plans(logical_cpus)
    if backend.name != "cpu":
        own = [
            p
            for p in predictions.values()
            if p.plan.backend == backend.name
            and p.predicted_s is not None
            and allowed(p.plan)
            and (mode is None or p.plan.mode == mode)
        ]
        if own:
            return min(own, key=lambda p: p.predicted_s).plan  # type: ignore[arg-type, return-value]
        fitting = [p for p in plans if mode is None or p.mode == mode] or plans
        return fitting[0].with_settings(fmt, prec)
    timed = [
        p
        for p in predictions.values()
        if p.plan.backend == "cpu"
        and p.plan.mode == mode
        and p.predicted_s is not None
        and (not threads or p.plan.threads == threads)
        and allowed(p.plan)
    ]
    if threads and not timed:
        return Plan("cpu", threads=threads, mode=mode).with_settings(fmt, prec)
    if timed:
        return min(timed, key=lambda p: p.predicted_s).plan  # type: ignore[arg-type, return-value]
    return max((p for p in plans if p.mode == mode), key=lambda p: p.threads or 0).with_settings(fmt, prec)


def fallback_plan(cfg: SessionConfig, backend: Any, logical_cpus: int, predictions: dict[Plan, PlanPrediction]) -> Plan:
    """Eager CPU loading its batches itself, whatever failed (a device, compiling, a DataLoader
    worker that could not start or died)."""
    if cfg.threads:
        return Plan("cpu", threads=cfg.threads)
    last = plan_for(backend, logical_cpus, predictions, None, memory_format="contiguous", precision="fp32")
    return last.with_loader(None)


def override_availability(
    backend: str, target: Any, profile: Any, threads: int | None, mode: str | None
) -> Availability:
    """Whether the run may move to `backend` (resolved: `target`; a CPU plan: `threads`, `mode`)."""
    avail = target.availability()
    if avail and profile is not None:
        avail = target.supports(profile)
    if avail and mode and profile is not None:
        avail = target.supports_plan(profile, Plan(backend, threads=threads, mode=mode))
    return avail
