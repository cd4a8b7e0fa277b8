"""The run's row in the history, from its start ("running", so a kill -9 leaves it findable) to its
end, and what the cost model learns from it: the load the run met (its own UI included) beside its
predicted and actual time and energy."""

from __future__ import annotations

import inspect
import json
from dataclasses import replace
from typing import Any

from trainpilot.energy.run_energy import run_energy


class RunRecorder:
    def __init__(self) -> None:
        self.log: Any = None  # runlog.RunLog: this run's row in the history, from its start
        self._meter: Any = None  # machine.contention.ExternalCpuMeter, from the first step on

    def start_meter(self) -> None:
        from trainpilot.machine.contention import ExternalCpuMeter

        self._meter = ExternalCpuMeter().__enter__()

    def start(
        self,
        predictor: Any,
        machine_id: str,
        *,
        run_id: str,
        profile: Any,
        plan: Any,
        load: Any,
        predicted_s: float | None,
        epochs_done: int,
    ) -> None:
        from trainpilot.predict.history import run_record
        from trainpilot.run.runlog import RunLog, history_of

        history = history_of(predictor)
        if history is None or plan is None:
            return
        self.log = RunLog(history)
        self.log.start(
            run_record(
                run_id=run_id,
                machine_id=machine_id,
                profile=profile,
                plan=plan,
                load=load,
                predicted_s=predicted_s,
                actual_s=0.0,
                status="running",
                epochs_done=epochs_done,
            )
        )

    def checkpointed(self, epoch: int) -> None:
        if self.log is not None:
            self.log.checkpointed(epoch)

    def close_progress(self) -> None:
        if self.log is not None:
            self.log.close()  # the run's progress connection; the end is written on one of its own

    @property
    def row_id(self) -> int | None:
        """The run's history row, written when it started (None: no history, or not started)."""
        return self.log.row_id if self.log is not None else None

    def load_met(self, logical_cpus: int) -> Any:
        """The load during the run, or None when the meter never started or cannot read /proc."""
        if self._meter is None:
            return None
        try:
            self._meter.__exit__(None, None, None)
            return self._meter.result.as_sample(logical_cpus)
        except Exception:  # noqa: BLE001 - a meter that cannot read /proc costs the figure, not the run
            return None

    def learn_phases(self, agent: Any, *, run_id: str, profile: Any, phases: list[Any], steps_per_epoch: int) -> int:
        """A run the closed loop moved timed several plans, each under its own load: each phase of
        an epoch's steps or more is learnt as the epochs it measured (its own row, status
        "phase", kept out of the history's run listing), so the cost model learns the machine
        under load too. Returns how many were learnt."""
        record = getattr(agent.predictor, "record", None)
        if record is None or steps_per_epoch < 1:
            return 0
        from trainpilot.machine.contention import ExternalCpu

        learnt = 0
        for k, phase in enumerate(phases):
            epochs = phase.steps // steps_per_epoch
            if epochs < 1 or phase.seconds <= 0:
                continue
            load = ExternalCpu(1.0, phase.others, 0.0).as_sample(agent.hardware.logical_cpus)
            shaped = replace(profile, epochs=epochs)
            try:
                predicted = agent.predictor.predict(shaped, phase.plan, load).predicted_s
            except Exception:  # noqa: BLE001 - learnt without its prediction's error
                predicted = None
            actual = phase.seconds * epochs * steps_per_epoch / phase.steps  # its pace, over whole epochs
            record(
                shaped,
                phase.plan,
                load,
                predicted,
                actual,
                run_id=f"{run_id}.phase{k + 1}",
                status="phase",
                epochs_done=epochs,
            )
            learnt += 1
        return learnt

    def finish(
        self,
        agent: Any,
        *,
        run_id: str,
        profile: Any,
        plan: Any,
        status: str,
        result: dict[str, Any],
        epoch_records: list[dict[str, Any]],
        plan_changes: list[dict[str, Any]],
        trained: bool,
        met: Any,
    ) -> None:
        """Give the row its final status; the cost model learns from the run only when it trained
        something on one plan (a run whose plan changed mid-way timed two plans at once) in one
        process (a run on ranks: below)."""
        from trainpilot.parallel.ddp_plan import ddp_world_size

        one_plan = len({json.dumps(c["plan"], sort_keys=True) for c in plan_changes}) <= 1
        # A run on ranks is listed with the launch's prediction, but the cost model does not learn
        # from its row: learning compares a row with the one-process roofline of its plan, which
        # for "ddp-N" is one rank's plan training every batch alone (not N shares and an
        # all-reduce), so its ratio would be noise; its measured error would widen the intervals
        # of one-process plans with another model's misses; and its workload's step probes ran on
        # one rank's cores, not the machine's, so they must not join the probes the workload's
        # runs agree on (predict/learning.probe_consensus). What a launch teaches is learnt where
        # it is modelled: its start-up beyond training (parallel/launch_cost.py).
        learn = trained and one_plan and ddp_world_size(plan) is None
        row = self.row_id
        if not learn and row is None:
            return
        if met is None:
            from trainpilot.machine.monitor import measure_load

            met = measure_load(0.0)
        done = dict(
            predicted_s=result["predicted_s"],
            actual_s=result["actual_s"] or 0.0,
            status=status,
            epochs_done=len(epoch_records),
        )
        energy = run_energy(epoch_records)
        if learn:
            record = agent.predictor.record
            extra: dict[str, Any] = {"energy": energy} if _takes_energy(record) else {}
            if row is not None:
                extra["row_id"] = row
            record(profile, plan, met, run_id=run_id, **done, **extra)
        else:
            from trainpilot.predict.history import run_record

            rec = run_record(
                run_id=run_id, machine_id=agent.hardware.machine_id, profile=profile, plan=plan, load=met, **done
            )
            self.log.finish(replace(rec, energy_j=energy.joules, energy_source=energy.source), learn=False)


def _takes_energy(record: Any) -> bool:
    """Whether a predictor's `record` takes `energy=` (one written before energy was recorded may not)."""
    try:
        params = inspect.signature(record).parameters.values()
    except (TypeError, ValueError):
        return False
    return any(p.name == "energy" or p.kind is inspect.Parameter.VAR_KEYWORD for p in params)
