"""`TrainPilotCallback`: times a Lightning fit's training, writes the run to TrainPilot's history with
its predicted and actual time (so the agent learns from Lightning runs), and logs the agent's trace to
the Trainer's loggers.

Lightning is imported only when the callback is first used, so the class is built then, from
`CallbackHooks` and Lightning's `Callback` (`callback_class()`).
"""

from __future__ import annotations

import math
import warnings
from typing import Any

from trainpilot.hosted.plan_rows import plan_of_device
from trainpilot.hosted.record import HostedRun, expect
from trainpilot.lightning.choice import Choice, last_choice, plan_module, remember
from trainpilot.lightning.requirement import require_lightning
from trainpilot.units import seconds as seconds_text


class CallbackHooks:
    """Times the fit's training and records it in TrainPilot's history.

    choice: the decision to record against; default the one `choose` made for the module, else the
    callback plans the module itself when training starts (profiling a CPU copy of it on the
    Trainer's training DataLoader), so the history still gets a predicted time.

    After the fit, `result` holds the recorded figures (run_id, status, plan, predicted_s, actual_s,
    epochs_done, steps) and `notes` what could not be done. A fit that raises is recorded as
    "failed" (Ctrl-C: "interrupted"). Runs on one device are recorded; a multi-process fit is not.
    """

    def __init__(self, choice: Choice | None = None, *, objective: str = "time") -> None:
        super().__init__()
        self.choice = choice
        self.objective = objective
        self.result: dict[str, Any] | None = None
        self.notes: list[str] = []
        self._run: HostedRun | None = None

    # ------------------------------------------------------------------ the fit's start and end

    def on_train_start(self, trainer: Any, pl_module: Any) -> None:
        self._run, self.result = None, None
        if trainer.world_size > 1:
            self._note("TrainPilot records single-device fits only; this one runs in several processes")
            return
        try:
            self._run = self._start(trainer, pl_module)
        except Exception as exc:  # noqa: BLE001 - bookkeeping must never stop the user's fit
            self._note(f"not recorded: {type(exc).__name__}: {exc}")
            return
        run, choice = self._run, self._choice_of(pl_module)
        assert choice is not None
        ex = run.expectation
        trace = [*choice.trace, *ex.notes]
        planned = ex.planned_s
        trace.append(
            f"this fit: {ex.plan.label}, {int(ex.planned_steps) if math.isfinite(ex.planned_steps) else 'unbounded'}"
            " training batches" + (f", predicted {seconds_text(planned)}" if planned is not None else "")
        )
        self._log(
            trainer,
            {
                "trainpilot_run_id": run.run_id,
                "trainpilot_plan": ex.plan.label,
                "trainpilot_predicted_s": planned,
                "trainpilot_confidence": choice.confidence,
                "trainpilot_trace": trace,
            },
            text="\n".join(trace),
        )

    def _start(self, trainer: Any, pl_module: Any) -> HostedRun:
        import torch

        from trainpilot.run.config import new_run_id

        loader = trainer.train_dataloader
        device = trainer.strategy.root_device
        choice = self._choice_of(pl_module)
        if choice is None:
            choice = self._plan_here(loader, pl_module)
        plan = plan_of_device(device, torch.get_num_threads(), int(getattr(loader, "num_workers", 0) or 0))
        max_epochs = trainer.max_epochs
        epochs_left = max_epochs - trainer.current_epoch if max_epochs is not None and max_epochs >= 0 else None
        steps_left = None
        if trainer.max_steps is not None and trainer.max_steps >= 0:
            steps_left = (trainer.max_steps - trainer.global_step) * trainer.accumulate_grad_batches
        expectation = expect(
            choice,
            plan,
            steps_per_epoch=float(trainer.num_training_batches),
            epochs_left=epochs_left,
            steps_left=steps_left,
        )
        run = HostedRun(expectation, new_run_id())
        run.open()
        self.notes.extend(run.notes)
        return run

    def _choice_of(self, pl_module: Any) -> Choice | None:
        return self.choice if self.choice is not None else last_choice(pl_module)

    def _plan_here(self, loader: Any, pl_module: Any) -> Choice:
        """Plan the module as `choose` would, on a CPU copy: the module is on its device already."""
        import copy

        def cpu_copy() -> Any:
            return copy.deepcopy(pl_module).to("cpu")  # a LightningModule's copy leaves its Trainer behind

        epochs = 1
        choice = plan_module(pl_module, loader, epochs=epochs, objective=self.objective, model=cpu_copy)
        remember(pl_module, choice)
        return choice

    def on_fit_end(self, trainer: Any, pl_module: Any) -> None:
        self._finish(trainer, "success")

    def on_exception(self, trainer: Any, pl_module: Any, exception: BaseException) -> None:
        if self._run is not None:
            self._run.clock.stop()  # the device may be what failed: no waiting on it
        self._finish(trainer, "interrupted" if isinstance(exception, KeyboardInterrupt) else "failed")

    def _finish(self, trainer: Any, status: str) -> None:
        run = self._run
        if run is None or run.summary is not None:
            return
        try:
            self.result = run.finish(status)
        except Exception as exc:  # noqa: BLE001 - bookkeeping must never stop the user's fit
            self._note(f"not recorded: {type(exc).__name__}: {exc}")
            return
        self.notes.extend(n for n in run.notes if n not in self.notes)
        result = self.result
        self._log(
            trainer,
            {
                "trainpilot_status": status,
                "trainpilot_predicted_s": result["predicted_s"],
                "trainpilot_actual_s": result["actual_s"],
                "trainpilot_epochs_done": result["epochs_done"],
            },
        )

    # ------------------------------------------------------------------ the training clock

    def on_train_epoch_start(self, trainer: Any, pl_module: Any) -> None:
        if self._run is not None:
            self._run.clock.start()

    def on_train_batch_start(self, trainer: Any, pl_module: Any, batch: Any, batch_idx: int) -> None:
        if self._run is not None:
            self._run.clock.start()  # again after a validation run inside the epoch

    def on_train_batch_end(self, trainer: Any, pl_module: Any, outputs: Any, batch: Any, batch_idx: int) -> None:
        if self._run is not None:
            self._run.clock.steps += 1

    def on_validation_start(self, trainer: Any, pl_module: Any) -> None:
        if self._run is not None and not trainer.sanity_checking:
            self._run.clock.stop(pl_module.device)

    def on_train_epoch_end(self, trainer: Any, pl_module: Any) -> None:
        if self._run is not None:
            self._run.clock.stop(pl_module.device)
            self._run.clock.epochs += 1

    # ------------------------------------------------------------------ telling the user

    def _note(self, message: str) -> None:
        self.notes.append(message)
        warnings.warn(f"TrainPilot: {message}", RuntimeWarning, stacklevel=2)

    def _log(self, trainer: Any, params: dict[str, Any], text: str | None = None) -> None:
        """Give every logger of the Trainer `params` as hyperparameters (CSVLogger: hparams.yaml) and,
        to TensorBoard, the trace as text."""
        require_lightning()
        from lightning.pytorch.loggers import TensorBoardLogger

        for logger in trainer.loggers:
            try:
                logger.log_hyperparams(params)
                if text and isinstance(logger, TensorBoardLogger):
                    logger.experiment.add_text("trainpilot/trace", text.replace("\n", "  \n"), trainer.global_step)
            except Exception as exc:  # noqa: BLE001 - one logger's failure must not stop the fit or the others
                self.notes.append(f"{type(logger).__name__} did not take TrainPilot's figures: {exc}")


_CLASS: type | None = None


def callback_class() -> type:
    """`TrainPilotCallback`: `CallbackHooks` on Lightning's `Callback` (Lightning imported now)."""
    global _CLASS
    if _CLASS is None:
        from trainpilot.hosted.decisions import callback_on

        pl = require_lightning()
        _CLASS = callback_on(CallbackHooks, pl.Callback, "trainpilot.lightning")
    return _CLASS
