"""HardwareOrchestrator: the agent. Observe the workload and the hardware, think (predict every
plan, decide), act (train on the chosen plan). Every step is recorded as an `AgentStep` with text
and confidence; the session turns them into events for the TUI and --json.

The seed API (`profile_workload`, `observe`, `think`, `select_backend`, `predict_performance`,
`act`) keeps its documented contract; `plan()` is the richer call the session uses.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from trainpilot.energy.objective import check_objective, choose, figures_text
from trainpilot.energy.plan_power import annotate, power_for
from trainpilot.plans import Availability, Decision, Plan, PlanPrediction
from trainpilot.predict.first_estimate import FirstEstimate, cascade_backend
from trainpilot.predict.predictor import Predictor
from trainpilot.units import seconds as fmt_s

if TYPE_CHECKING:
    from trainpilot.job.workload import WorkloadProfile
    from trainpilot.machine.monitor import UtilizationSample
    from trainpilot.machine.probe import HardwareInfo

DEFAULT_INPUT_SHAPE = (1, 28, 28)  # the seed's examples train on 28x28 images
DEFAULT_CLASSES = 10


@dataclass(frozen=True)
class AgentStep:
    phase: str  # observe | think | act
    text: str
    confidence: float | None = None
    data: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class PlanningResult:
    predictions: tuple[PlanPrediction, ...]
    decision: Decision
    steps: tuple[AgentStep, ...]
    seconds: float  # time spent thinking (not profiling)


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


def observe_hardware(hardware: HardwareInfo, load: UtilizationSample) -> dict[str, Any]:
    """The observation dict the agent decides on (and --json reports)."""
    return {
        "ane_available": hardware.backends.get("ane", Availability(False)).available,
        "cpu_utilization": round(load.cpu_percent / 100.0, 4),
        "busy_cores": round(load.busy_cores, 2),
        "ui_cores": round(getattr(load, "ui_cores", 0.0), 3),  # of busy_cores: this process's own UI
        "per_core": [round(v, 1) for v in load.per_core],
        "logical_cpus": hardware.logical_cpus,
        "memory_percent": load.memory_percent,
        "available_backends": hardware.available_backends(),
        "backends": {name: a.display for name, a in hardware.backends.items()},
        "machine_id": hardware.machine_id,
        "timestamp": load.at,
    }


class HardwareOrchestrator:
    def __init__(
        self,
        predictor: Predictor | None = None,
        hardware: HardwareInfo | None = None,
        on_step: Callable[[AgentStep], None] | None = None,
        backends: Callable[[str], Any] | None = None,
        described_machine: Any = None,
        objective: str = "time",
    ):
        """`described_machine`: a shipped profile name, .toml path or TargetMachine on which
        `predict_performance` predicts backends this machine lacks (default: described.DESCRIBED_FOR)."""
        from trainpilot.backends import probe
        from trainpilot.parallel.plan_backends import resolve_backend

        self.backends = backends or resolve_backend  # name -> Backend
        self.described_machine = described_machine

        self.hardware = hardware or probe()
        self.predictor: Predictor = predictor or default_predictor(self.hardware)
        self.on_step = on_step
        self.trace: list[AgentStep] = []
        self.hardware_state: dict[str, Any] | None = None
        self.workload_profile: Any = None
        self.last_plan: Plan | None = None
        self.last_decision: Decision | None = None
        self.objective = check_objective(objective)  # time | energy | edp (energy/objective.py)

    # ---------------------------------------------------------------- trace

    def _step(
        self, phase: str, text: str, confidence: float | None = None, data: dict[str, Any] | None = None
    ) -> AgentStep:
        step = AgentStep(phase, text, confidence, dict(data or {}))
        self.trace.append(step)
        if self.on_step:
            self.on_step(step)
        return step

    # ---------------------------------------------------------------- seed API

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
        from trainpilot.job.workload import ModelSpec, build_model, profile_model

        spec = ModelSpec.from_config(model_config)
        model = build_model(spec, input_shape, num_classes)
        profile = profile_model(
            model, input_shape, num_classes, dataset_size, name=spec.name, batch_size=batch_size, epochs=epochs
        )
        return profile.to_dict()

    def observe(self, hardware_state: dict[str, Any], workload_profile: dict[str, Any] | WorkloadProfile) -> AgentStep:
        self.hardware_state = dict(hardware_state)
        self.workload_profile = workload_profile
        get = (
            workload_profile.get
            if isinstance(workload_profile, dict)
            else lambda k, d=None: getattr(workload_profile, k, d)
        )
        util = float(hardware_state.get("cpu_utilization", 0.0))
        text = (
            f"workload {get('model', 'model')}: {int(get('params', 0)):,} params, {get('layers', '?')} layers,"
            f" {float(get('flops_per_sample', 0.0)) / 1e6:.1f} MFLOP/sample, {get('dataset_size', '?')} samples;"
            f" CPU {util:.0%} busy{_ui_part(hardware_state)}, ANE {'available' if hardware_state.get('ane_available') else 'unavailable'}"
        )
        return self._step("observe", text, data={"hardware": self.hardware_state})

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

    # ---------------------------------------------------------------- planning

    def candidate_plans(
        self, profile: WorkloadProfile, backends: list[str] | None = None
    ) -> list[tuple[Plan, Availability]]:
        from trainpilot.backends import BACKEND_NAMES

        out: list[tuple[Plan, Availability]] = []
        for name in backends or BACKEND_NAMES:
            backend = self.backends(name)
            # what the probe saw (an Availability(False) is falsy, so no `or` here)
            avail = self.hardware.backends[name] if name in self.hardware.backends else backend.availability()
            if not avail:
                out.append((Plan(name), avail))
                continue
            for plan in backend.plans(self.hardware.logical_cpus):
                out.append((plan, backend.supports_plan(profile, plan)))
        if backends is None or "split" in backends:  # one batch across several workers at once
            from trainpilot.parallel.split_backend import split_candidates

            out.extend(split_candidates(self.backends, self.hardware.logical_cpus, profile, self.hardware.backends))
        return out

    def plan(
        self, profile: WorkloadProfile, load: UtilizationSample, hardware_state: dict[str, Any] | None = None
    ) -> PlanningResult:
        """Predict every plan, then decide. Emits one think step per plan and a decision step."""
        start = time.perf_counter()
        state = hardware_state or {}
        steps_before = len(self.trace)
        predictions: list[PlanPrediction] = []
        explain = getattr(self.predictor, "explain", lambda p: p.source)
        power = self.power()
        for plan, avail in self.candidate_plans(profile):
            if plan.backend == "ane" and avail and not state.get("ane_available", True):
                avail = Availability(False, "the observed hardware state says the ANE is unavailable")
            if not avail:
                prediction = PlanPrediction(plan, None, excluded_reason=avail.reason)
                self._step(
                    "think",
                    f"{plan.label}: excluded — {avail.reason}",
                    data={"plan": plan.to_dict(), "excluded": avail.reason},
                )
            else:
                prediction = annotate(self.predictor.predict(profile, plan, load), power)  # its energy beside its time
                if prediction.excluded:
                    self._step(
                        "think",
                        f"{plan.label}: excluded — {prediction.excluded_reason}",
                        data={"plan": plan.to_dict(), "excluded": prediction.excluded_reason},
                    )
                elif prediction.predicted_s is None:
                    self._step(
                        "think",
                        f"{plan.label}: no time estimate yet ({prediction.detail.get('note', 'uncalibrated')})",
                        data={"plan": plan.to_dict()},
                    )
                else:
                    self._step(
                        "think",
                        f"{plan.label}: predicted {figures_text(prediction)} ({explain(prediction)}; {prediction.detail.get('energy_source')})",
                        data={
                            "plan": plan.to_dict(),
                            "predicted_s": prediction.predicted_s,
                            "source": prediction.source,
                            "energy_j": prediction.detail.get("energy_j"),
                            "energy_source": prediction.detail.get("energy_source"),
                            "predicted_low_s": (prediction.detail.get("interval") or {}).get("low_s"),
                            "predicted_high_s": (prediction.detail.get("interval") or {}).get("high_s"),
                        },
                    )
            predictions.append(prediction)
        decision_state = dict(state)
        decision_state.setdefault("cpu_utilization", load.cpu_percent / 100.0)
        decision_state.setdefault("available_backends", self.hardware.available_backends())
        decision_state.setdefault("ane_available", self.hardware.backends.get("ane", Availability(False)).available)
        decision = choose(
            predictions, self.objective, self.predictor.decide(profile, predictions, load, decision_state)
        )
        for line in decision.reasoning:
            self._step("think", line, decision.confidence)
        chosen = next((p for p in predictions if p.plan == decision.plan and p.predicted_s is not None), None)
        predicted = (
            f", predicted {figures_text(chosen) if chosen else fmt_s(decision.predicted_s)}"
            if decision.predicted_s is not None
            else ""
        )
        self._step(
            "think",
            f"decision: {decision.plan.label}{predicted}, confidence {decision.confidence:.2f} ({decision.policy}, objective {self.objective})",
            decision.confidence,
            {
                "plan": decision.plan.to_dict(),
                "policy": decision.policy,
                "margin": decision.margin,
                "objective": self.objective,
            },
        )
        self.last_plan, self.last_decision = decision.plan, decision
        return PlanningResult(
            tuple(predictions), decision, tuple(self.trace[steps_before:]), time.perf_counter() - start
        )

    def power(self) -> Any:
        """Predicted power per plan (energy/plan_power.py), from the predictor's runs or figures;
        built at each plan(), so the runs finished since count."""
        return power_for(self.predictor, self.hardware.logical_cpus, self.hardware.machine_id)


def _ui_part(state: dict[str, Any]) -> str:
    ui = float(state.get("ui_cores", 0.0) or 0.0)
    return f" (this app's own UI {ui:.2f} cores of it)" if ui >= 0.01 else ""


def _as_profile(profile: dict[str, Any] | WorkloadProfile) -> WorkloadProfile:
    from trainpilot.job.workload import WorkloadProfile

    if isinstance(profile, WorkloadProfile):
        return profile
    fields = WorkloadProfile.__dataclass_fields__
    data = {k: v for k, v in profile.items() if k in fields}
    data["input_shape"] = tuple(data.get("input_shape", DEFAULT_INPUT_SHAPE))
    return WorkloadProfile(**data)


def default_predictor(hardware: HardwareInfo) -> Predictor:
    """The calibrated cost model when it can open, else the first estimate. (An uncalibrated cost
    model predicts with the first estimate and decides with the rule cascade itself, and records
    every run, so the history is there once the machine is calibrated.)"""
    try:
        from trainpilot.predict import CostModel

        return CostModel.open(hardware=hardware)
    except Exception:  # noqa: BLE001 - e.g. an unwritable data directory: the agent must still think
        return FirstEstimate(hardware.logical_cpus)
