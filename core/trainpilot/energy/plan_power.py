"""Predicted power per plan, so the agent can predict each plan's energy beside its time.

Where this machine measures energy (RAPL, NVML), measurements calibrate the figure: the median of
energy / time over the measured runs of that plan, else what `calibrate` measured for it
(power_calibration.py), else another CPU plan's runs per thread, scaled to this plan's threads.
Where nothing measures, the estimated runs of the plan still say how many cores it kept busy (CPU
seconds over wall time: a thread waiting for a busy core draws nothing), so their median J/s is the
plan's estimate, while the per-core figure they were estimated with is the current one. Elsewhere
(and for a described machine) the figure is the power figures' estimate: threads x watts per busy
core, plus the accelerator's board power for a device plan, labelled est.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from trainpilot.energy.figures import PowerFigures, machine_figures, target_figures
from trainpilot.energy.reading import Watts

if TYPE_CHECKING:
    from trainpilot.plans import Plan, PlanPrediction

HISTORY_LIMIT = 500  # newest runs read for power: enough for a median per plan, quick to read


def _cpu_key(plan: Plan) -> tuple[Any, ...]:
    # Compiling changes time, not the cores kept busy; a split plan's mode names its workers.
    return (plan.backend, plan.threads, plan.device, plan.mode if plan.workers else None)


@dataclass
class PlanPower:
    figures: PowerFigures
    logical_cpus: int = 1
    # key -> [(W, source, threads)]
    measured: dict[tuple[Any, ...], list[tuple[float, str, int | None]]] = field(default_factory=dict)
    calibrated: Any = None  # power_calibration.PowerCalibration of this machine, when measured
    # key -> W of est. runs at today's figure
    estimated: dict[tuple[Any, ...], list[float]] = field(default_factory=dict)

    @classmethod
    def for_machine(
        cls,
        history: Any = None,
        machine_id: str | None = None,
        logical_cpus: int = 1,
        figures: PowerFigures | None = None,
        records: Any = None,
        calibration_dir: Any = None,
    ) -> PlanPower:
        """`records`: runs already read (the cost model's), else read from `history`;
        `calibration_dir`: where `calibrate` stored measured power per plan."""
        from trainpilot.energy.power_calibration import load_power

        power = cls(figures or machine_figures(), logical_cpus, calibrated=load_power(calibration_dir, machine_id))
        if records is not None:
            for rec in records:
                power.learn(rec.plan, getattr(rec, "energy_j", None), getattr(rec, "energy_source", None), rec.actual_s)
        elif history is not None:
            try:
                records = history.records(machine_id, limit=HISTORY_LIMIT)
            except Exception:  # noqa: BLE001 - an unreadable history leaves the figures' estimate
                records = []
            for rec in records:
                power.learn(rec.plan, getattr(rec, "energy_j", None), getattr(rec, "energy_source", None), rec.actual_s)
        return power

    @classmethod
    def for_target(cls, target: Any) -> PlanPower:
        return cls(target_figures(target), int(getattr(target, "logical_cpus", 1) or 1))

    def learn(self, plan: Plan, energy_j: float | None, source: str | None, seconds: float | None) -> None:
        """Take one run's energy as a calibration point: a measured one always, an estimated one
        when it was estimated with today's per-core figure (it then tells the cores the plan used)."""
        if energy_j is None or not source or not seconds or seconds <= 0 or energy_j <= 0:
            return
        if source == self._estimate_source:
            self.estimated.setdefault(_cpu_key(plan), []).append(energy_j / seconds)
            return
        if not source.startswith("measured"):
            return
        self.measured.setdefault(_cpu_key(plan), []).append(
            (energy_j / seconds, source.split(": ", 1)[-1], plan.threads)
        )

    @property
    def _estimate_source(self) -> str:
        return f"{self.figures.cpu_source} x CPU time"  # what cpu_estimate.CpuTimeEstimate labels its runs

    def watts(self, plan: Plan) -> Watts:
        runs = self.measured.get(_cpu_key(plan))
        if runs:
            return Watts(
                statistics.median(w for w, _s, _t in runs),
                f"measured: {runs[0][1]}, {len(runs)} run(s) of this plan",
                estimated=False,
            )
        if plan.workers:  # a split plan runs its workers at once (hetero/): their power adds up
            parts = [self.watts(w) for w in plan.workers]
            return Watts(
                sum(p.watts for p in parts),
                " + ".join(f"{w.label}: {p.source}" for w, p in zip(plan.workers, parts, strict=False)),
                estimated=any(p.estimated for p in parts),
            )
        if self.calibrated is not None:
            from trainpilot.energy.power_calibration import power_key

            measured = self.calibrated.watts.get(power_key(plan))
            if measured is not None:
                return Watts(measured, f"{self.calibrated.source}, calibration", estimated=False)
        threads = plan.threads or 1
        if plan.backend == "cpu":
            past = self.estimated.get(_cpu_key(plan))
            if past:
                return Watts(
                    statistics.median(past),
                    f"{self.figures.cpu_source} x the CPU time {len(past)} run(s) of this plan used",
                )
            per_thread = [w / t for key, rows in self.measured.items() if key[0] == "cpu" for w, _s, t in rows if t]
            if per_thread:
                name = next(s for key, rows in self.measured.items() if key[0] == "cpu" for _w, s, _t in rows)
                return Watts(
                    statistics.median(per_thread) * threads,
                    f"measured: {name}, {len(per_thread)} run(s) of other CPU plans scaled to {threads} thread(s)",
                    estimated=False,
                )
            return Watts(self.figures.cpu_w_per_core * threads, f"{self.figures.cpu_source} x {threads} thread(s)")
        # A device plan keeps one host core feeding it, besides the device itself.
        accel_w, accel_source = self.figures.accelerator(plan.backend)
        return Watts(accel_w + self.figures.cpu_w_per_core, f"{accel_source} + 1 host core")


def annotate(prediction: PlanPrediction, power: PlanPower, watts: Watts | None = None) -> PlanPrediction:
    """The prediction with its predicted energy in `detail`: energy_j, power_w, energy_source,
    energy_estimated. An excluded or untimed plan is returned as it is."""
    if prediction.predicted_s is None or prediction.excluded:
        return prediction
    figure = watts or power.watts(prediction.plan)
    detail = dict(prediction.detail)
    detail.update(
        energy_j=figure.watts * prediction.predicted_s,
        power_w=figure.watts,
        energy_source=figure.source,
        energy_estimated=figure.estimated,
    )
    return replace(prediction, detail=detail)


def power_for(predictor: Any, logical_cpus: int, machine_id: str | None = None) -> PlanPower:
    """The power model that goes with a predictor: a described machine's figures, or this
    machine's figures calibrated by its history's measured runs."""
    described = getattr(predictor, "described", None)
    if described is not None:
        return PlanPower.for_target(described)
    records = None
    if getattr(predictor, "is_calibrated", False) and callable(getattr(predictor, "observations", None)):
        # The runs the cost model has in memory already (its own runs join them as they finish):
        # no second read of the history while the agent thinks.
        records = [o.record for o in predictor.observations()]
    return PlanPower.for_machine(
        getattr(predictor, "history", None),
        machine_id or getattr(predictor, "machine_id", None),
        logical_cpus,
        records=records,
        calibration_dir=getattr(predictor, "calibration_dir", None),
    )
