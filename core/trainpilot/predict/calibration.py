"""What calibration knows about a machine, stored as one JSON file per machine.

For every plan (backend + threads or device) it holds the fitted coefficients of the step-time
model (`features.COLUMNS`) in two CPU states: idle, and next to one core kept busy by another
process. A described machine (`target_profiles.TargetMachine`) gets the same structure derived
from its published figures instead (`derive.calibration_for_target`).
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from trainpilot.plans import Plan
from trainpilot.predict.compile_cost import CompileCalibration
from trainpilot.predict.features import COLUMNS

FORMAT_VERSION = 2


def plan_key(plan: Plan) -> str:
    """Stable text key of a plan: cpu:2, cpu:2:compiled, cuda:cuda:0, mps:mps, ane:frozen-backbone."""
    if plan.backend == "cpu":
        return f"cpu:{plan.threads or 0}" + (f":{plan.mode}" if plan.mode else "")
    return f"{plan.backend}:{plan.device or plan.mode or ''}"


@dataclass(frozen=True)
class StateRates:
    """Step-time coefficients for one plan in one CPU state, and how well they fitted."""

    coef: dict[str, float]  # COLUMNS -> seconds per unit (per step, per layer, per FLOP, per byte)
    fit_error: float  # RMS relative error of the fit over the micro-benchmarks
    warmup_steps: float = 1.0  # the first step of a fresh model costs this many steady steps extra
    points: int = 0
    external_load: float = 0.0  # cores other processes used while it was measured (beyond our own load)
    # the measurements behind the fit: (benchmark, steady step s, first-step extra s, other processes' cores)
    samples: tuple[tuple[str, float, float, float], ...] = ()
    # FLOP/s each layer kind's best micro-benchmark sustained over a whole training step (what a
    # user would call the machine's throughput; the coef above are marginal costs next to fixed ones)
    sustained_flops: dict[str, float] = field(default_factory=dict)

    def vector(self) -> list[float]:
        return [float(self.coef.get(c, 0.0)) for c in COLUMNS]

    def flops_per_s(self, kind: str) -> float | None:
        c = self.coef.get(kind, 0.0)
        return 1.0 / c if c > 0 else None

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> StateRates:
        return cls(
            coef={str(k): float(v) for k, v in data["coef"].items()},
            fit_error=float(data.get("fit_error", 0.0)),
            warmup_steps=float(data.get("warmup_steps", 1.0)),
            points=int(data.get("points", 0)),
            external_load=float(data.get("external_load", 0.0)),
            samples=tuple((str(a), float(b), float(c), float(d)) for a, b, c, d in data.get("samples", ())),
            sustained_flops={str(k): float(v) for k, v in data.get("sustained_flops", {}).items()},
        )


@dataclass(frozen=True)
class PlanCalibration:
    plan: Plan
    idle: StateRates
    busy: StateRates | None = None  # one other core kept busy by a real load process (CPU plans)
    memory_bandwidth_bytes_per_s: float | None = None

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PlanCalibration:
        return cls(
            plan=Plan.from_dict(data["plan"]),
            idle=StateRates.from_dict(data["idle"]),
            busy=StateRates.from_dict(data["busy"]) if data.get("busy") else None,
            memory_bandwidth_bytes_per_s=data.get("memory_bandwidth_bytes_per_s"),
        )


@dataclass(frozen=True)
class Calibration:
    machine_id: str
    logical_cpus: int
    plans: dict[str, PlanCalibration]  # plan_key -> calibration
    created_at: float = field(default_factory=time.time)
    quick: bool = False
    duration_s: float = 0.0
    torch_version: str = ""
    described: str | None = None  # the described machine's name; None when measured here
    notes: tuple[str, ...] = ()
    version: int = FORMAT_VERSION
    # torch.compile's costs (`calibrate --compile`); None until measured. An optional key: files
    # without it read as before, and a TrainPilot that does not know it ignores it.
    compile: CompileCalibration | None = None
    # Step settings that keep the math (predict/settings_calibration.py): per eager plan key, per
    # variant ("channels_last", "bf16", "channels_last+bf16"), per layer kind, the cost of that
    # kind's FLOPs in the variant over their cost in fp32 NCHW. An optional key, as `compile` is.
    settings: dict[str, dict[str, dict[str, float]]] = field(default_factory=dict)

    @property
    def is_described(self) -> bool:
        return self.described is not None

    def for_plan(self, plan: Plan) -> PlanCalibration | None:
        """The calibration of `plan`; for an unmeasured CPU thread count, the nearest measured one.
        A compiled CPU plan's is its eager plan's (what compiling changes is in `compile`)."""
        if plan.is_compiled:
            plan = plan.as_eager()
        found = self.plans.get(plan_key(plan))
        if found is not None or plan.backend != "cpu":
            if found is None and plan.backend in ("cuda", "mps"):
                # a GPU measured under another device string (cuda:1 vs cuda:0) is the same kind
                return next((p for p in self.plans.values() if p.plan.backend == plan.backend), None)
            return found
        cpu = [p for p in self.plans.values() if p.plan.backend == "cpu" and p.plan.threads]
        if not cpu:
            return None
        want = plan.threads or self.logical_cpus
        return min(cpu, key=lambda p: (abs((p.plan.threads or 0) - want), p.plan.threads))

    def backends(self) -> list[str]:
        return sorted({p.plan.backend for p in self.plans.values()})

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["plans"] = {
            key: {
                "plan": p.plan.to_dict(),
                "idle": asdict(p.idle),
                "busy": asdict(p.busy) if p.busy else None,
                "memory_bandwidth_bytes_per_s": p.memory_bandwidth_bytes_per_s,
            }
            for key, p in self.plans.items()
        }
        data["notes"] = list(self.notes)
        data["compile"] = self.compile.to_dict() if self.compile else None
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Calibration:
        if int(data.get("version", 0)) != FORMAT_VERSION:
            raise ValueError(f"calibration format {data.get('version')} (this TrainPilot reads {FORMAT_VERSION})")
        return cls(
            machine_id=str(data["machine_id"]),
            logical_cpus=int(data["logical_cpus"]),
            plans={str(k): PlanCalibration.from_dict(v) for k, v in data["plans"].items()},
            created_at=float(data.get("created_at", 0.0)),
            quick=bool(data.get("quick", False)),
            duration_s=float(data.get("duration_s", 0.0)),
            torch_version=str(data.get("torch_version", "")),
            described=data.get("described"),
            notes=tuple(data.get("notes", ())),
            compile=CompileCalibration.from_dict(data["compile"]) if data.get("compile") else None,
            settings={
                str(k): {str(v): {str(kind): float(r) for kind, r in kinds.items()} for v, kinds in variants.items()}
                for k, variants in (data.get("settings") or {}).items()
            },
        )


def calibration_path(directory: Path, machine_id: str) -> Path:
    return directory / f"{machine_id}.json"


def save_calibration(calibration: Calibration, directory: Path) -> Path:
    """Write atomically (temp file + rename), so a reader never sees half a file."""
    directory.mkdir(parents=True, exist_ok=True)
    path = calibration_path(directory, calibration.machine_id)
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    tmp.write_text(json.dumps(calibration.to_dict(), indent=1, sort_keys=True), encoding="utf-8")
    os.replace(tmp, path)
    return path


def load_calibration(directory: Path, machine_id: str) -> tuple[Calibration | None, str | None]:
    """(calibration, None), or (None, why not). A damaged or older file counts as not calibrated:
    calibrating again is cheap, crashing is not acceptable."""
    path = calibration_path(directory, machine_id)
    if not path.exists():
        return None, "not calibrated yet"
    try:
        return Calibration.from_dict(json.loads(path.read_text(encoding="utf-8"))), None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        return None, f"{path}: unreadable calibration ({exc}); run `trainpilot headless calibrate`"
