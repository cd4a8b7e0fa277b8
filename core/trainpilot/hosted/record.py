"""A host loop's training (a Lightning fit, a Hugging Face Trainer's train()) as a row in TrainPilot's
history, kept as a TrainPilot run keeps its own (run/learning.py): written "running" when training
starts (a killed process leaves it findable as crashed), finished with the plan the host ran, the
load it met, and the predicted and actual training time, so the cost model learns from it and
`trainpilot headless history` lists it.

The prediction follows the host: the agent predicted `decision.epochs` epochs of the profiled data;
the host's own batches per epoch and epochs (its max epochs, max steps) scale it. Training that ends
by itself (max epochs, max steps, early stopping) is recorded with the prediction for the batches it
trained; failed or interrupted training with the prediction for the whole run and the epochs it
finished, as a TrainPilot run is (the cost model scales an interrupted run's prediction by epochs).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from trainpilot.hosted.clock import TrainClock
from trainpilot.hosted.plan_rows import row_for
from trainpilot.job.workload import WorkloadProfile
from trainpilot.plans import Plan


class Decision(Protocol):
    """What the agent decided before the host trained (trainpilot.lightning's and
    trainpilot.huggingface's Choice): the plan, the epochs and profile it predicted, and the report
    with every plan's row."""

    @property
    def plan(self) -> Plan: ...

    @property
    def epochs(self) -> int: ...

    @property
    def profile(self) -> WorkloadProfile: ...

    @property
    def report(self) -> dict[str, Any]: ...


@dataclass
class Expectation:
    """What the host's training is predicted to take, on the plan it runs."""

    plan: Plan
    profile: WorkloadProfile  # as the host trains it: its batches per epoch, its planned epochs
    per_step_s: float | None  # None: the agent predicted nothing for this plan
    planned_steps: float  # inf: the training has no end the host knows of (Lightning's max_epochs=-1)
    notes: list[str] = field(default_factory=list)

    def predicted_for(self, steps: float) -> float | None:
        if self.per_step_s is None or not math.isfinite(steps):
            return None
        return self.per_step_s * steps

    @property
    def planned_s(self) -> float | None:
        return self.predicted_for(self.planned_steps)

    def text(self) -> str:
        """'cpu (2 threads), batches of 64, 32 training batches (2 epochs of 16), predicted 758 ms'."""
        from trainpilot.units import seconds

        per_epoch = self.profile.steps_per_epoch
        head = f"{self.plan.label}, batches of {self.profile.batch_size}, "
        if not math.isfinite(self.planned_steps):
            shape = f"unbounded ({per_epoch} an epoch)"
        else:
            steps = int(self.planned_steps)
            if per_epoch > 0 and steps % per_epoch == 0:
                shape = f"{steps} training batches ({steps // per_epoch} epochs of {per_epoch})"
            else:
                shape = f"{steps} training batches ({per_epoch} an epoch)"
        planned = self.planned_s
        return head + shape + (f", predicted {seconds(planned)}" if planned is not None else ", no prediction")


def expect(
    choice: Decision,
    plan: Plan,
    *,
    steps_per_epoch: float,
    epochs_left: int | None,
    steps_left: float | None = None,
) -> Expectation:
    """The prediction for training of `epochs_left` epochs (None: unbounded) of `steps_per_epoch`
    batches, at most `steps_left` batches (None: no limit), on `plan`."""
    notes: list[str] = []
    row = row_for(choice.report.get("plans", ()), plan)
    if not _same_plan(plan, choice.plan):
        notes.append(f"the host runs {plan.label}, not the agent's choice {choice.plan.label}")
    if row is None:
        notes.append(f"the agent predicted no plan on {plan.label}'s device: recorded without a prediction")
        per_step = None
    else:
        if not _same_plan(Plan.from_dict(row), plan):
            notes.append(f"{plan.label} predicted as the nearest plan the agent weighed, {Plan.from_dict(row).label}")
        base_steps = max(choice.epochs, 1) * choice.profile.steps_per_epoch
        per_step = float(row["predicted_s"]) / base_steps
    profile = choice.profile
    if not math.isfinite(steps_per_epoch) or steps_per_epoch < 1:
        steps_per_epoch = profile.steps_per_epoch
    steps_per_epoch = int(steps_per_epoch)
    planned = steps_per_epoch * epochs_left if epochs_left is not None else math.inf
    if steps_left is not None:
        planned = min(planned, steps_left)
    if steps_per_epoch != profile.steps_per_epoch:  # a limit on batches, drop_last, a sampler of its own
        profile = replace(profile, dataset_size=steps_per_epoch * profile.batch_size)
    epochs = math.ceil(planned / steps_per_epoch) if math.isfinite(planned) else 1
    return Expectation(plan, replace(profile, epochs=max(int(epochs), 1)), per_step, planned, notes)


def _same_plan(a: Plan, b: Plan) -> bool:
    return replace(a, loader_workers=a.loader_workers or None) == replace(b, loader_workers=b.loader_workers or None)


class HostedRun:
    """One host loop's training: its clock, its history row and the load it met."""

    def __init__(self, expectation: Expectation, run_id: str):
        from trainpilot.run.learning import RunRecorder

        self.expectation = expectation
        self.run_id = run_id
        self.clock = TrainClock()
        self.notes: list[str] = []
        self.summary: dict[str, Any] | None = None
        self._cost: Any = None
        self._recorder = RunRecorder()  # the history row from the start, and the load met, as a session keeps them

    def open(self) -> None:
        """Write the "running" row and start measuring the load (call it from the training thread)."""
        from trainpilot.backends import probe
        from trainpilot.machine.monitor import measure_load
        from trainpilot.predict.model import CostModel

        ex = self.expectation
        self._cost = CostModel.open(hardware=probe())
        self._recorder.start(
            self._cost,
            self._cost.machine_id,
            run_id=self.run_id,
            profile=ex.profile,
            plan=ex.plan,
            load=measure_load(0.0),
            predicted_s=ex.planned_s,
            epochs_done=0,
        )
        if self._recorder.log is not None:
            self.notes.extend(self._recorder.log.notes)
        self._recorder.start_meter()

    def _load_met(self) -> Any:
        met = self._recorder.load_met(self._cost.logical_cpus)
        if met is None:  # a meter that cannot read /proc costs the figure, not the run
            from trainpilot.machine.monitor import measure_load

            self.notes.append(
                f"run {self.run_id}: the load it met could not be measured; recorded with the load at its end"
            )
            met = measure_load(0.0)
        return met

    def finish(self, status: str) -> dict[str, Any]:
        """Record the training's end (status success | failed | interrupted); the summary of its row."""
        if self.summary is not None:
            return self.summary
        ex, clock = self.expectation, self.clock
        if status == "success":
            profile = replace(ex.profile, epochs=max(clock.epochs, 1))
            predicted = ex.predicted_for(clock.steps)
        else:
            profile, predicted = ex.profile, ex.planned_s
        if self._cost is not None:
            self._cost.record(
                profile,
                ex.plan,
                self._load_met(),
                predicted,
                clock.seconds,
                run_id=self.run_id,
                status=status,
                epochs_done=clock.epochs,
                row_id=self._recorder.row_id,
            )
            self._recorder.close_progress()
            self.notes.extend(n for n in self._cost.notices if "could not record" in n)
        else:  # open() never ran or failed before the cost model opened: nothing took the row
            self.notes.append(f"run {self.run_id} not recorded: its history row was never opened")
        self.summary = {
            "run_id": self.run_id,
            "status": status,
            "plan": ex.plan.label,
            "batch_size": ex.profile.batch_size,
            "predicted_s": predicted,
            "actual_s": clock.seconds,
            "epochs": profile.epochs,
            "epochs_done": clock.epochs,
            "steps": clock.steps,
        }
        return self.summary
