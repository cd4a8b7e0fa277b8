"""How a run proceeds as one process: the hooks where a rank of a distributed run differs
(distributed_session.py). The session composes one; nothing subclasses the session.

Each hook is a place where ranks must differ or agree: who leads (records the history, writes the
checkpoints), which plan (the agent's, or the launch's), how a stop is agreed, what resuming reads,
and what the result adds."""

from __future__ import annotations

import time
from collections.abc import Callable, Generator, Iterator
from pathlib import Path
from typing import Any

from trainpilot import events as ev
from trainpilot.plans import Plan
from trainpilot.run.config import SessionConfig
from trainpilot.run.plan_choice import PlanChoice, act_plan
from trainpilot.units import seconds as fmt_s

Epoch = Generator[ev.Event, None, bool]


class RunStrategy:
    can_fall_back = True  # whether a failed device plan may continue on the CPU from the last good state
    writes_checkpoints = True  # and records the run in the history

    def configure(self, config: SessionConfig) -> SessionConfig:
        return config

    def agree_run_id(self, run_id: str) -> str:
        return run_id

    def load_resume_state(self, path: Path) -> dict[str, Any]:
        from trainpilot.run.checkpoint import load_checkpoint

        return load_checkpoint(path)

    def first_sight(self, run_id: str, predictor: Any) -> Iterator[ev.Event]:
        """The first run on a machine quick-calibrates the cost model, so the agent decides with
        measured figures from then on (TRAINPILOT_AUTO_CALIBRATE=0 leaves it to the rule cascade)."""
        if getattr(predictor, "is_calibrated", True) or getattr(predictor, "is_described", False):
            return
        from trainpilot.predict.auto import auto_calibration_enabled, ensure_calibrated

        if not auto_calibration_enabled():
            return
        yield ev.AgentStepped(
            run_id,
            "observe",
            "first run on this machine: a quick calibration of the cost model"
            " (`trainpilot headless calibrate` measures fully)",
        )
        start = time.perf_counter()
        try:
            ensure_calibrated(predictor)
        except Exception as exc:  # calibration is an optimisation: a failure must not cost the run
            yield ev.AgentStepped(
                run_id, "observe", f"calibration failed ({type(exc).__name__}: {exc}); the rule cascade decides"
            )
            return
        yield ev.AgentStepped(run_id, "observe", f"calibrated in {fmt_s(time.perf_counter() - start)}")

    def choose_plan(self, decision: Any, config: SessionConfig, agent: Any, profile: Any, backends: Any) -> PlanChoice:
        return act_plan(decision, config, agent, profile, backends)

    def predicts(self, plan: Plan) -> bool:
        """Whether the cost model's prediction of `plan` is this run's."""
        return True

    def adapt_off_reason(self) -> str | None:
        """Why the closed loop may not move this run mid-way (None: it may)."""
        return None

    def make_trainer(
        self,
        model: Any,
        train_set: Any,
        val_set: Any,
        config: SessionConfig,
        backends: Any,
        steering: Any,
        prepared: Any = None,
    ) -> Any:
        from trainpilot.run.trainer import Trainer

        return Trainer(model, train_set, val_set, **trainer_options(config, backends, prepared))

    def stop_agreed(self, trainer: Any, stop_reason: str | None) -> str | None:
        """The reason to stop at this step boundary, or None to go on."""
        return stop_reason

    def on_stop_requested(self) -> None:
        """Called in the requesting thread when a stop is asked."""

    def after_switch(self, run_id: str, trainer: Any) -> Iterator[ev.Event]:
        return iter(())

    def epoch_record(self, record: dict[str, Any]) -> None:
        """A closed epoch's record, before it is checkpointed (a rank adds up the group's energy)."""

    def run_epoch(self, epoch: Epoch, run_id: str, checkpoint_here: Callable[[], Iterator[ev.Event]]) -> Epoch:
        return (yield from epoch)

    def finish(self, status: str, message: str, trainer: Any) -> tuple[str, str]:
        return status, message

    def result_extra(self, trainer: Any) -> dict[str, Any]:
        return {}


def trainer_options(config: SessionConfig, backends: Any, prepared: Any = None) -> dict[str, Any]:
    """What a trainer takes from the run's options and the prepared job (its batch size, loss or
    step, optimizer, scheduler, order and loss reduction; the zoo's defaults without a job)."""
    job = prepared.job if prepared is not None else None
    return {
        "batch_size": prepared.batch_size if prepared is not None else config.batch_size,
        "lr": config.lr,
        "seed": config.seed,
        "backends": backends,
        "objective": prepared.objective if prepared is not None else None,
        "optimizer": job.optimizer if job is not None else None,
        "scheduler": job.scheduler if job is not None else None,
        "shuffle": prepared.shuffle if prepared is not None else True,
        "loss_reduction": getattr(job, "loss_reduction", "mean"),
    }
