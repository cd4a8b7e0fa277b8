"""Measured power per plan, for machines that can measure energy (RAPL, NVML): part of
`trainpilot headless calibrate`.

Each plan runs a matrix-multiply load for about a second while the meter reads the counters, so
the agent knows what each plan draws before any run of it has been measured (runs of the plan
then take over: plan_power.py). Idle power is read first, over the same time, and stored beside
it: RAPL counts the whole package, so a plan's figure includes the idle floor, as a run's would.
Where every reading would be an estimate, nothing is measured and the figures stay labelled est.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trainpilot.energy.meter import EnergyMeter, open_meter
from trainpilot.plans import Plan

Progress = Callable[[float, str], None]


def power_key(plan: Plan) -> str:
    """Compiling changes a plan's time, not the cores it keeps busy: compiled shares eager's key."""
    if plan.backend == "cpu":
        return f"cpu:{plan.threads or 0}"
    return f"{plan.backend}:{plan.device or ''}"


@dataclass(frozen=True)
class PowerCalibration:
    machine_id: str
    source: str  # "measured: RAPL package"
    watts: dict[str, float] = field(default_factory=dict)  # power_key -> W under the load
    idle_w: float | None = None
    measured_at: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "machine_id": self.machine_id,
            "source": self.source,
            "watts": dict(self.watts),
            "idle_w": self.idle_w,
            "measured_at": self.measured_at,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PowerCalibration:
        return cls(
            str(data["machine_id"]),
            str(data["source"]),
            {str(k): float(v) for k, v in data["watts"].items()},
            None if data.get("idle_w") is None else float(data["idle_w"]),
            float(data.get("measured_at", 0.0)),
        )


def power_path(directory: Path | str, machine_id: str) -> Path:
    return Path(directory) / f"power-{machine_id}.json"


def save_power(calibration: PowerCalibration, directory: Path | str) -> Path:
    """Atomically (temp file + rename), as the time calibration is written."""
    Path(directory).mkdir(parents=True, exist_ok=True)
    path = power_path(directory, calibration.machine_id)
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    tmp.write_text(json.dumps(calibration.to_dict(), indent=1, sort_keys=True), encoding="utf-8")
    os.replace(tmp, path)
    return path


def load_power(directory: Path | str | None, machine_id: str | None) -> PowerCalibration | None:
    """The stored power calibration, or None (none yet, or a damaged file: the figures decide)."""
    if directory is None or machine_id is None:
        return None
    try:
        return PowerCalibration.from_dict(json.loads(power_path(directory, machine_id).read_text(encoding="utf-8")))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _burn(plan: Plan, seconds: float) -> None:
    """A matrix-multiply load on the plan's device and threads for `seconds`."""
    import torch

    before = torch.get_num_threads()
    device = plan.device or ("cuda" if plan.backend == "cuda" else "cpu")
    try:
        if plan.backend == "cpu" and plan.threads:
            torch.set_num_threads(plan.threads)
        a = torch.randn(384, 384, device=device)
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            for _ in range(8):
                a = torch.tanh(a @ a)
            if plan.backend == "cuda":
                torch.cuda.synchronize()
    finally:
        torch.set_num_threads(before)


def measure_power(
    plans: Iterable[Plan],
    machine_id: str,
    *,
    seconds: float = 1.0,
    meter_for: Callable[[Plan], EnergyMeter] = open_meter,
    burn: Callable[[Plan, float], None] = _burn,
    progress: Progress | None = None,
) -> tuple[PowerCalibration | None, str]:
    """(calibration, "") where every part of the reading is measured, else (None, why not)."""
    plans = [p for p in plans if p.backend in ("cpu", "cuda") and not p.is_compiled]
    say = progress or (lambda _f, _m: None)
    probe = meter_for(Plan("cpu", threads=1))
    try:
        if any(s.estimated for s in probe.sources):
            return None, f"nothing measures energy here ({probe.label}); energy per plan stays an estimate"
        with probe:
            say(0.0, "power: idle")
            mark, t0 = probe.mark(), time.perf_counter()
            time.sleep(seconds)
            idle = probe.since(mark)
            idle_w = (idle.joules or 0.0) / (time.perf_counter() - t0)
    finally:
        probe.close()
    watts: dict[str, float] = {}
    label = idle.source
    for i, plan in enumerate(plans):
        say((i + 1) / (len(plans) + 1), f"power: {plan.label}")
        with meter_for(plan) as meter:
            if any(s.estimated for s in meter.sources):
                continue  # e.g. a GPU without NVML: its figure stays the estimate
            mark, t0 = meter.mark(), time.perf_counter()
            burn(plan, seconds)
            energy = meter.since(mark)
            watts[power_key(plan)] = (energy.joules or 0.0) / (time.perf_counter() - t0)
            label = energy.source
    say(1.0, "power measured")
    return PowerCalibration(machine_id, label, watts, idle_w, time.time()), ""


def calibrate_power(model: Any, progress: Progress | None = None, **kwargs: Any) -> tuple[PowerCalibration | None, str]:
    """Measure and store power per plan for `model` (a CostModel of this machine), where the
    machine measures energy. Returns (calibration, "") or (None, why not)."""
    if getattr(model, "is_described", False) or getattr(model, "calibration_dir", None) is None:
        return None, "a described machine is not measured"
    calibration, why = measure_power(model.plans(), model.machine_id, progress=progress, **kwargs)
    if calibration is not None:
        save_power(calibration, model.calibration_dir)
    return calibration, why
