"""The seed project's agent API, kept to its documented contract: `HardwareOrchestrator` is the
agent (agent/orchestrator.py) plus the seed's calls — `profile_workload`, `observe` (the agent's
own), `think`, `select_backend`, `predict_performance` and `act`.

`predict_performance` answers for a backend this machine lacks on a described machine that has it
(predict/described.py), as the seed's README asks of the ANE on any machine.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from trainpilot.agent.orchestrator import Agent
from trainpilot.plans import Plan
from trainpilot.predict.first_estimate import cascade_backend
from trainpilot.units import seconds as fmt_s

if TYPE_CHECKING:
    from trainpilot.job.workload import WorkloadProfile
    from trainpilot.machine.monitor import UtilizationSample

DEFAULT_INPUT_SHAPE = (1, 28, 28)  # the seed's examples train on 28x28 images
DEFAULT_CLASSES = 10


class HardwareOrchestrator(Agent):
    def __init__(self, *args: Any, described_machine: Any = None, **kwargs: Any):
        """`described_machine`: a shipped profile name, .toml path or TargetMachine on which
        `predict_performance` predicts backends this machine lacks (default: described.DESCRIBED_FOR)."""
        super().__init__(*args, **kwargs)
        self.described_machine = described_machine

    def profile_workload(
        self,
        model_config: dict[str, Any] | str,
        dataset_size: int,
        input_shape: tuple[int, ...] = DEFAULT_INPUT_SHAPE,
        num_classes: int = DEFAULT_CLASSES,
        batch_size: int = 64,
        epochs: int = 1,
    ) -> dict[str, Any]:
        """Build the real module from the config and measure it (see workload.profile_model)."""
        from trainpilot.job.models import ModelSpec, build_model
        from trainpilot.job.workload import profile_model

        spec = ModelSpec.from_config(model_config)
        model = build_model(spec, input_shape, num_classes)
        profile = profile_model(
            model, input_shape, num_classes, dataset_size, name=spec.name, batch_size=batch_size, epochs=epochs
        )
        return profile.to_dict()

    def select_backend(
        self, profile: dict[str, Any] | WorkloadProfile, hardware_state: dict[str, Any]
    ) -> tuple[str, float]:
        """The seed's deterministic cascade (see estimate.cascade_backend for the rules and the
        documented "low CPU" threshold, LOW_CPU_UTILIZATION = 0.5)."""
        state = dict(hardware_state)
        state.setdefault("available_backends", [n for n in self.hardware.available_backends() if n != "ane"])
        backend, confidence, _why = cascade_backend(profile, state)
        return backend, confidence

    def think(self) -> str:
        """Decide from the last observation; returns the backend name (the plan is in last_plan)."""
        if self.hardware_state is None or self.workload_profile is None:
            raise RuntimeError("observe() must be called before think()")
        profile = _as_profile(self.workload_profile)
        load = load_from_state(self.hardware_state, self.hardware.logical_cpus)
        result = self.plan(profile, load, self.hardware_state)
        return result.decision.plan.backend

    def predict_performance(self, profile: dict[str, Any] | WorkloadProfile, backend: str) -> float:
        """Predicted seconds for the whole run on `backend`'s best plan here (first estimate or cost
        model). A backend this machine lacks (the seed's README asks for the ANE on any machine) is
        predicted on a described machine that has it (predict/described.py: an Apple M2 for the ANE and
        MPS, by default); the figure says so in its `note`, its `machine` and the agent's trace.
        Returns a `described.PredictedSeconds` (a float). Raises ValueError only when no machine,
        here or described, can run `backend` for this workload."""
        from trainpilot.predict.described import PredictedSeconds, predict_described

        prof = _as_profile(profile)
        load = load_from_state(self.hardware_state or {}, self.hardware.logical_cpus)
        best: tuple[float, Plan] | None = None
        why_not = None
        for plan, avail in self.candidate_plans(prof, backends=[backend]):
            if not avail:
                why_not = why_not or avail.reason
                continue
            prediction = self.predictor.predict(prof, plan, load)
            if prediction.predicted_s is not None and (best is None or prediction.predicted_s < best[0]):
                best = (prediction.predicted_s, plan)
        if best is not None:
            return PredictedSeconds(best[0], "this machine", best[1].label)
        try:
            figure = predict_described(prof, backend, self.described_machine)
        except ValueError as exc:
            raise ValueError(
                f"no time estimate for backend '{backend}': not here ({why_not or 'no estimate'}), and {exc}"
            ) from None
        self._step(
            "think",
            f"{figure.plan}: predicted {fmt_s(figure)} on the described machine {figure.machine} ({figure.note};"
            f" not on this machine: {why_not or 'no estimate here'})",
            data={
                "backend": backend,
                "predicted_s": float(figure),
                "described_machine": figure.machine,
                "note": figure.note,
                "plan_label": figure.plan,
            },
        )
        return figure

    def act(self, backend: str, environment: Any) -> dict[str, Any]:
        """Train in `environment` on `backend`. An unavailable backend falls back to the CPU, says so
        in `message` and records the reason in `fallback_reason`; it never crashes."""
        profile = (
            self.workload_profile
            if isinstance(self.workload_profile, dict)
            else getattr(self.workload_profile, "to_dict", dict)()
        )
        plan = self.last_plan if self.last_plan and self.last_plan.backend == backend else None
        self._step(
            "act",
            f"training on {plan.label if plan else backend}",
            self.last_decision.confidence if self.last_decision else None,
        )
        return environment.execute_training(backend, profile, plan=plan)


def load_from_state(hardware_state: dict[str, Any], logical_cpus: int) -> UtilizationSample:
    """Turn a seed-style hardware_state ({"cpu_utilization": 0.3, ...}) into a sample."""
    from trainpilot.machine.monitor import UtilizationSample

    if "per_core" in hardware_state:
        per_core = tuple(float(v) for v in hardware_state["per_core"])
    else:
        util = float(hardware_state.get("cpu_utilization", 0.0))
        per_core = tuple([max(0.0, min(util, 1.0)) * 100.0] * logical_cpus)
    return UtilizationSample(
        at=float(hardware_state.get("timestamp", time.time())),
        per_core=per_core,
        cpu_percent=sum(per_core) / max(len(per_core), 1),
        memory_percent=float(hardware_state.get("memory_percent", 0.0)),
        memory_used_bytes=int(hardware_state.get("memory_used_bytes", 0)),
        process_rss_bytes=int(hardware_state.get("process_rss_bytes", 0)),
    )


def _as_profile(profile: dict[str, Any] | WorkloadProfile) -> WorkloadProfile:
    from trainpilot.job.workload import WorkloadProfile

    if isinstance(profile, WorkloadProfile):
        return profile
    fields = WorkloadProfile.__dataclass_fields__
    data = {k: v for k, v in profile.items() if k in fields}
    data["input_shape"] = tuple(data.get("input_shape", DEFAULT_INPUT_SHAPE))
    return WorkloadProfile(**data)
