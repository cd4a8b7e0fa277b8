"""What the run expects of itself: each plan's predicted epoch, the 80 % interval of any time
derived from it (an epoch, the rest of the run, an ETA), and the cost of moving between plans."""

from __future__ import annotations

from typing import Any

from trainpilot.plans import Plan, PlanPrediction
from trainpilot.run.state import Segment


class RunForecast:
    def __init__(self) -> None:
        self.predictions: dict[Plan, PlanPrediction] = {}
        self.predictor: Any = None  # asked for a plan the agent did not predict (an override's)
        self.profile: Any = None
        self.predicts: Any = lambda plan: True  # a strategy may rule plans out (a multi-rank plan)
        # ... and predict such a plan itself (a rank: the launch, parallel/launch_forecast.py)
        self.own: Any = lambda plan: None

    def epoch_s(self, plan: Plan, load: Any) -> float | None:
        if not self.predicts(plan):
            own = self.own(plan)
            return per_epoch_of(own, self.profile.epochs) if own is not None else None
        prediction = self.predictions.get(plan)
        if prediction is None and self.predictor is not None and self.profile is not None:
            try:
                prediction = self.predictor.predict(self.profile, plan, load)
            except Exception:
                prediction = None
            if prediction is not None:
                self.predictions[plan] = prediction
        if prediction is None or prediction.predicted_s is None:
            return None
        return per_epoch_of(prediction, self.profile.epochs)

    def bounds(self, plan: Plan | None, value_s: float | None) -> tuple[float | None, float | None]:
        """The 80 % interval of a time derived from `plan`'s prediction: the prediction's own
        interval, relative (predict/interval.py)."""
        from trainpilot.predict.interval import scaled

        prediction = None if plan is None else self.predictions.get(plan) or self.own(plan)
        if prediction is None:
            return None, None
        return scaled(prediction.detail.get("interval"), prediction.predicted_s, value_s)

    def segments_predicted(self, segments: list[Segment], steps_per_epoch: int, load: Any) -> float | None:
        """The epoch's predicted time, each segment on its own plan (sets each segment's share)."""
        total = 0.0
        for seg in segments:
            per_epoch = self.epoch_s(seg.plan, load)
            if per_epoch is None:
                return None
            seg.predicted_s = per_epoch * seg.steps / steps_per_epoch
            total += seg.predicted_s
        return total

    def segments_bounds(self, segments: list[Segment], predicted: float | None) -> tuple[float | None, float | None]:
        if predicted is None:
            return None, None
        lows = highs = 0.0
        for seg in segments:
            if not seg.steps:
                continue
            low, high = self.bounds(seg.plan, seg.predicted_s)
            if low is None or high is None:
                return None, None
            lows, highs = lows + low, highs + high
        return lows, highs

    def eta(
        self, plan: Plan, remaining_steps: int, steps_per_epoch: int, records: list[dict[str, Any]], load: Any
    ) -> float | None:
        """Remaining time from the prediction, corrected by how fast this run has actually gone."""
        per_epoch = self.epoch_s(plan, load)
        if per_epoch is None:
            return None
        done = sum(r["actual_s"] for r in records)
        predicted_done = sum(r["predicted_s"] or 0 for r in records)
        ratio = done / predicted_done if predicted_done > 0 else 1.0
        return per_epoch * remaining_steps / steps_per_epoch * ratio


def per_epoch_of(prediction: PlanPrediction, epochs: int) -> float:
    """A predicted run's epoch: the predictor's own per-epoch figure, else the run over its epochs."""
    per_epoch = prediction.detail.get("per_epoch_s")
    return float(per_epoch) if per_epoch is not None else float(prediction.predicted_s or 0.0) / max(epochs, 1)


def switch_cost_s(profile: Any, old: Plan, new: Plan) -> float:
    """Predicted cost of moving the run between plans: copying weights and optimizer state (Adam:
    3x the weights) across the device boundary at a conservative 2 GB/s; free between CPU plans."""
    if old.backend == new.backend == "cpu":
        return 0.0
    return 3 * profile.weight_bytes / 2e9 + 0.05
