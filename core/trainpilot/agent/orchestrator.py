"""The agent. Observe the workload and the hardware, think (predict every plan, decide), and say
which plan to act on. Every step is recorded as an `AgentStep` with text and confidence; the session
turns them into events for the TUI and --json.

`plan()` is the call the session makes. The seed project's API over the same agent
(`HardwareOrchestrator`: profile_workload, think, select_backend, predict_performance, act) lives
in compat/orchestrator.py.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from trainpilot.energy.objective import check_objective, choose, figures_text
from trainpilot.energy.plan_power import annotate, power_for
from trainpilot.plans import Availability, Decision, Plan, PlanPrediction
from trainpilot.predict.first_estimate import FirstEstimate
from trainpilot.predict.predictor import Predictor
from trainpilot.units import seconds as fmt_s

if TYPE_CHECKING:
    from trainpilot.job.workload import WorkloadProfile
    from trainpilot.machine.monitor import UtilizationSample
    from trainpilot.machine.probe import HardwareInfo


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


class Agent:
    def __init__(
        self,
        predictor: Predictor | None = None,
        hardware: HardwareInfo | None = None,
        on_step: Callable[[AgentStep], None] | None = None,
        backends: Callable[[str], Any] | None = None,
        objective: str = "time",
        memory_format: str = "auto",
        precision: str = "fp32",
    ):
        from trainpilot.backends import probe
        from trainpilot.parallel.plan_backends import resolve_backend

        self.backends = backends or resolve_backend  # name -> Backend

        self.hardware = hardware or probe()
        self.predictor: Predictor = predictor or default_predictor(self.hardware)
        self.on_step = on_step
        self.trace: list[AgentStep] = []
        self.hardware_state: dict[str, Any] | None = None
        self.workload_profile: Any = None
        self.last_plan: Plan | None = None
        self.last_decision: Decision | None = None
        self.last_predictions: tuple[PlanPrediction, ...] = ()
        self.objective = check_objective(objective)  # time | energy | edp (energy/objective.py)
        # which layouts and precisions the plans may use (agent/step_settings.py; --memory-format, --precision)
        self.memory_format, self.precision = memory_format, precision

    # ---------------------------------------------------------------- trace

    def _step(
        self, phase: str, text: str, confidence: float | None = None, data: dict[str, Any] | None = None
    ) -> AgentStep:
        step = AgentStep(phase, text, confidence, dict(data or {}))
        self.trace.append(step)
        if self.on_step:
            self.on_step(step)
        return step

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
            f" CPU {util:.0%} busy{_ui_part(hardware_state)}, ANE"
            f" {'available' if hardware_state.get('ane_available') else 'unavailable'}"
        )
        return self._step("observe", text, data={"hardware": self.hardware_state})

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
        from trainpilot.agent.loader_plans import with_loader_workers
        from trainpilot.agent.step_settings import with_step_settings

        out = with_step_settings(out, profile, self.memory_format, self.precision)
        return with_loader_workers(out, profile, self.hardware.logical_cpus)

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
        from trainpilot.agent.loader_plans import loader_line
        from trainpilot.agent.plan_summary import summarize
        from trainpilot.agent.step_settings import check_native, payback_line, settings_line, settings_reasons

        loading = loader_line(profile)
        if loading:
            self._step(
                "think",
                loading,
                data={"load_s_per_batch": getattr(profile, "load_s_per_batch", 0.0), "part": "context"},
            )
        settings = settings_line(profile, self.memory_format, self.precision)
        if settings:
            self._step(
                "think",
                settings,
                data={"memory_format": self.memory_format, "precision": self.precision, "part": "context"},
            )
        epochs = int(getattr(profile, "epochs", 1) or 1)
        for plan, avail in self.candidate_plans(profile):
            if plan.backend == "ane" and avail and not state.get("ane_available", True):
                avail = Availability(False, "the observed hardware state says the ANE is unavailable")
            if not avail:
                prediction = PlanPrediction(plan, None, excluded_reason=avail.reason)
                self._step(
                    "think",
                    f"{plan.label}: excluded — {avail.reason}",
                    data={"plan": plan.to_dict(), "excluded": avail.reason, "part": "plan"},
                )
            else:
                prediction = annotate(self.predictor.predict(profile, plan, load), power)  # its energy beside its time
                if prediction.excluded:
                    self._step(
                        "think",
                        f"{plan.label}: excluded — {prediction.excluded_reason}",
                        data={"plan": plan.to_dict(), "excluded": prediction.excluded_reason, "part": "plan"},
                    )
                elif prediction.predicted_s is None:
                    self._step(
                        "think",
                        f"{plan.label}: no time estimate yet ({prediction.detail.get('note', 'uncalibrated')})",
                        data={"plan": plan.to_dict(), "part": "plan"},
                    )
                else:
                    self._step(
                        "think",
                        f"{plan.label}: predicted {figures_text(prediction)} ({explain(prediction)};"
                        f" {prediction.detail.get('energy_source')})"
                        + (f"; {prediction.detail['notes']}" if prediction.detail.get("notes") else "")
                        + (
                            f"; {payback}"
                            if plan.is_compiled and (payback := payback_line(plan, [*predictions, prediction], epochs))
                            else ""
                        ),
                        data={
                            "part": "plan",
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
        check_native(self.precision, predictions)  # an explicit precision nothing here runs: the reasons, not a plan
        decision_state = dict(state)
        decision_state.setdefault("cpu_utilization", load.cpu_percent / 100.0)
        decision_state.setdefault("available_backends", self.hardware.available_backends())
        decision_state.setdefault("ane_available", self.hardware.backends.get("ane", Availability(False)).available)
        decision = choose(
            predictions, self.objective, self.predictor.decide(profile, predictions, load, decision_state)
        )
        why_settings = settings_reasons(decision.plan, predictions, epochs)
        for line in (*decision.reasoning, *why_settings):
            # part: what the decision's summary below says in short, so a compact view leaves the line out
            self._step("think", line, decision.confidence, {"part": "reason"})
        chosen = next((p for p in predictions if p.plan == decision.plan and p.predicted_s is not None), None)
        predicted = (
            f", predicted {figures_text(chosen) if chosen else fmt_s(decision.predicted_s)}"
            if decision.predicted_s is not None
            else ""
        )
        self._step(
            "think",
            f"decision: {decision.plan.label}{predicted}, confidence {decision.confidence:.2f} ({decision.policy},"
            f" objective {self.objective})",
            decision.confidence,
            {
                "plan": decision.plan.to_dict(),
                "policy": decision.policy,
                "margin": decision.margin,
                "objective": self.objective,
                # what a person reads of it (agent/plan_summary.py): the CLI's table, the app's Agent panel
                "summary": summarize(
                    predictions,
                    decision,
                    self.objective,
                    context=[line for line in (loading, settings) if line],
                    settings_reasons=why_settings,
                ).to_dict(),
            },
        )
        self.last_plan, self.last_decision = decision.plan, decision
        self.last_predictions = tuple(predictions)
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


def default_predictor(hardware: HardwareInfo) -> Predictor:
    """The calibrated cost model when it can open, else the first estimate. (An uncalibrated cost
    model predicts with the first estimate and decides with the rule cascade itself, and records
    every run, so the history is there once the machine is calibrated.)"""
    try:
        from trainpilot.predict import CostModel

        return CostModel.open(hardware=hardware)
    except Exception:  # noqa: BLE001 - e.g. an unwritable data directory: the agent must still think
        return FirstEstimate(hardware.logical_cpus)
