"""A run's result as the documented `--json` schema (docs/json.md), and its one-line summary."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from trainpilot.energy.run_energy import run_energy
from trainpilot.plans import Plan
from trainpilot.run.config import SessionConfig
from trainpilot.run.state import Runtime
from trainpilot.units import seconds as fmt_s

Bounds = Callable[[Plan | None, float | None], tuple[float | None, float | None]]
EPOCH_FIELDS = ("epoch", "loss", "accuracy", "val_accuracy", "predicted_s", "actual_s", "plan", "segments")


def run_result(
    *,
    run_id: str,
    status: str,
    message: str,
    config: SessionConfig,
    plan: Plan | None,
    profile: Any,
    rt: Runtime,
    bounds: Bounds,
) -> dict[str, Any]:
    epochs = rt.epoch_records
    last = epochs[-1] if epochs else {}
    predicted_total = None
    if epochs and all(e["predicted_s"] is not None for e in epochs):
        predicted_total = sum(e["predicted_s"] for e in epochs)
    if epochs and all(e.get("predicted_low_s") is not None for e in epochs):
        low, high = sum(e["predicted_low_s"] for e in epochs), sum(e["predicted_high_s"] for e in epochs)
    else:
        low, high = bounds(plan, predicted_total if predicted_total is not None else rt.predicted_total_s)
    return {
        "schema": 1,
        "run_id": run_id,
        "status": status,
        "backend": plan.backend if plan else None,
        "plan": plan.to_dict() if plan else None,
        "confidence": rt.confidence,
        "policy": rt.policy,
        "model": profile.model if profile else None,
        "dataset": config.dataset or "demo",
        "params": profile.params if profile else None,
        "predicted_s": predicted_total if predicted_total is not None else rt.predicted_total_s,
        "predicted_low_s": low,  # the 80 % interval of predicted_s (predict/interval.py)
        "predicted_high_s": high,
        "actual_s": sum(e["actual_s"] for e in epochs) if epochs else None,
        "execution_time": sum(e["actual_s"] for e in epochs) if epochs else 0.0,
        "loss": last.get("loss"),
        "accuracy": last.get("accuracy"),
        "val_accuracy": last.get("val_accuracy"),
        "val_loss": last.get("val_loss"),
        "message": message,
        "fallback_reason": rt.fallback_reason,
        "plan_changes": rt.plan_changes,
        "checkpoint": rt.checkpoint,
        "epochs": [
            {
                **{k: e[k] for k in EPOCH_FIELDS},
                "energy_j": e.get("energy_j"),
                "predicted_low_s": e.get("predicted_low_s"),
                "predicted_high_s": e.get("predicted_high_s"),
                "val_loss": e.get("val_loss"),
            }
            for e in epochs
        ],
        "objective": config.objective,
        **run_energy(epochs).to_dict(),
    }


def success_message(config: SessionConfig, plan: Plan, rt: Runtime, metric: str | None = "accuracy") -> str:
    acc = ""
    if rt.val_accuracy is not None:
        value = f"{rt.val_accuracy:.1%}" if metric == "accuracy" else f"{rt.val_accuracy:.4g}"
        acc = f", validation {metric or 'metric'} {value}"
    if rt.val_accuracy is None and rt.epoch_records and rt.epoch_records[-1].get("val_loss") is not None:
        acc = f", validation loss {rt.epoch_records[-1]['val_loss']:.4g}"
    pred = f" (predicted {fmt_s(rt.predicted_total_s)})" if rt.predicted_total_s else ""
    energy = run_energy(rt.epoch_records)
    used = f", {energy.text}" if energy.joules is not None else ""
    text = f"trained {config.epochs} epoch(s) on {plan.short_label} in {fmt_s(rt.train_seconds)}{pred}{used}{acc}"
    if rt.fallback_reason:
        text += f"; fell back to the CPU: {rt.fallback_reason}"
    return text


def epoch_record(
    *,
    epoch: int,
    loss: float,
    accuracy: float | None,
    val_accuracy: float | None,
    predicted: float | None,
    bounds: tuple[float | None, float | None],
    segments: list[Any],
    plan: Plan,
    energy: Any,
) -> dict[str, Any]:
    """One epoch as the result's `epochs` list and the checkpoint keep it (actual: its training steps)."""
    return {
        "epoch": epoch,
        "loss": loss,
        "accuracy": accuracy,
        "val_accuracy": val_accuracy,
        "predicted_s": predicted,
        "actual_s": sum(s.seconds for s in segments),
        "plan": plan.to_dict(),
        "segments": [
            {"plan": s.plan.to_dict(), "steps": s.steps, "actual_s": s.seconds, "predicted_s": s.predicted_s}
            for s in segments
            if s.steps
        ],
        "energy_j": energy.joules if energy is not None else None,
        "energy_source": energy.source if energy is not None else None,
        "predicted_low_s": bounds[0],
        "predicted_high_s": bounds[1],
    }
