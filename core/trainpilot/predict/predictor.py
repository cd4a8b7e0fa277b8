"""The interface between the agent and whatever predicts training time.

Two implementations: `estimate.FirstEstimate` (FLOPs over a measured CPU throughput, with the seed's
rule cascade as the policy) and `predict.CostModel` (calibrated roofline + run history). The agent
only speaks this protocol, so the cost model replaces the first estimate without touching it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from trainpilot.plans import Decision, Plan, PlanPrediction

if TYPE_CHECKING:
    from trainpilot.job.workload import WorkloadProfile
    from trainpilot.machine.monitor import UtilizationSample


@runtime_checkable
class Predictor(Protocol):
    def predict(self, profile: WorkloadProfile, plan: Plan, load: UtilizationSample) -> PlanPrediction:
        """Whole-run seconds for `profile.epochs` epochs; detail["per_epoch_s"] per epoch."""
        ...

    def decide(
        self,
        profile: WorkloadProfile,
        predictions: list[PlanPrediction],
        load: UtilizationSample,
        hardware: dict[str, Any],
    ) -> Decision:
        """Pick among the non-excluded predictions and say why, with a confidence in [0, 1]."""
        ...

    def record(
        self,
        profile: WorkloadProfile,
        plan: Plan,
        load: UtilizationSample,
        predicted_s: float | None,
        actual_s: float,
        *,
        run_id: str,
        status: str,
        epochs_done: int,
        energy: Any = None,
    ) -> None:
        """Learn from a finished (or partly finished) run. Must never raise for I/O trouble.
        `energy`: the run's `energy.Energy` (joules and their source), recorded beside its time."""
        ...
