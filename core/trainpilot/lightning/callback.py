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
from trainpilot.hosted.planned_for import plan_again, why_plan_again
from trainpilot.hosted.record import HostedRun, expect
from trainpilot.lightning.choice import Choice, last_choice, plan_module, remember
from trainpilot.lightning.mapping import fit_precision
from trainpilot.lightning.requirement import require_lightning


class CallbackHooks:
    """Times the fit's training and records it in TrainPilot's history.

    choice: the decision to record against; default the one `choose` made for the module, else the
    callback plans the module itself when training starts (profiling a CPU copy of it on the
    Trainer's training DataLoader), so the history still gets a predicted time. A decision profiled
    at another batch size than the Trainer's DataLoader gives, or in fp32 for a fit in "bf16-mixed"
    or "16-mixed", is planned again the same way when training starts.

    verbose: the logged trace in the long form (every plan's line, every reason), not the compact
    opening `trainpilot headless run` prints.

    After the fit, `result` holds the recorded figures (run_id, status, plan, batch_size,
    predicted_s, actual_s, epochs_done, steps) and `notes` what could not be done (each also a
    warning and, where a logger takes it, `trainpilot_notes`). A fit that raises is recorded as
    "failed" (Ctrl-C: "interrupted"). Runs on one device are recorded; a multi-process fit is not.
    """

    def __init__(self, choice: Choice | None = None, *, objective: str = "time", verbose: bool = False) -> None:
        super().__init__()
        self.choice = choice
        self.objective = objective
        self.verbose = verbose
        self.result: dict[str, Any] | None = None
        self.notes: list[str] = []
        self._run: HostedRun | None = None
        self._choice_used: Choice | None = None
        self._trainer: Any = None

    # ------------------------------------------------------------------ the fit's start and end

    def on_train_start(self, trainer: Any, pl_module: Any) -> None:
        self._run, self.result, self._trainer = None, None, trainer
        if trainer.world_size > 1:
            self._note("not recorded: TrainPilot records single-device fits only; this one runs in several processes")
            return
        planning: list[str] = []  # what the callback did about the decision before training
        try:
            self._run = self._start(trainer, pl_module, planning)
        except Exception as exc:  # noqa: BLE001 - bookkeeping must never stop the user's fit
            self._note(f"not recorded: {type(exc).__name__}: {exc}")
            return
        run, choice = self._run, self._choice_used
        assert choice is not None
        ex = run.expectation
        trace = [*(choice.trace if self.verbose else choice.opening()), *planning, *ex.notes]
        trace.append(f"this fit: {ex.text()}")
        self._log(
            trainer,
            {
                "trainpilot_run_id": run.run_id,
                "trainpilot_plan": ex.plan.label,
                "trainpilot_batch_size": ex.profile.batch_size,
                "trainpilot_steps": int(ex.planned_steps) if math.isfinite(ex.planned_steps) else None,
                "trainpilot_predicted_s": ex.planned_s,
                "trainpilot_confidence": choice.confidence,
                "trainpilot_trace": trace,
            },
            text="\n".join(trace),
        )

    def _start(self, trainer: Any, pl_module: Any, planning: list[str]) -> HostedRun:
        import torch

        from trainpilot.run.config import new_run_id

        loader = trainer.train_dataloader
        device = trainer.strategy.root_device
        precision, unpredicted = fit_precision(trainer.precision)
        if unpredicted:
            planning.append(unpredicted)
        workers = int(getattr(loader, "num_workers", 0) or 0)
        plan = plan_of_device(device, torch.get_num_threads(), workers, precision=precision)
        batch = getattr(loader, "batch_size", None)
        batch = batch if isinstance(batch, int) and batch > 0 else None
        choice = self._choice_of(pl_module)
        if choice is None:
            choice = self._plan_here(loader, pl_module, precision)
        elif (why := why_plan_again(choice, plan, batch)) is not None:
            choice = self._plan_again(loader, pl_module, precision, choice, why, planning)
        self._choice_used = choice
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
        for note in run.notes:  # the "running" row the history could not take
            self._note(note)
        return run

    def _choice_of(self, pl_module: Any) -> Choice | None:
        return self.choice if self.choice is not None else last_choice(pl_module)

    def _plan_again(
        self, loader: Any, pl_module: Any, precision: str | None, choice: Choice, why: str, planning: list[str]
    ) -> Choice:
        """The decision planned again for what this fit runs (hosted/planned_for.py)."""

        def here() -> Choice:
            return self._plan_here(loader, pl_module, precision, objective=choice.objective)

        return plan_again(here, choice, why, planning, self._note)

    def _plan_here(
        self, loader: Any, pl_module: Any, precision: str | None = None, *, objective: str | None = None
    ) -> Choice:
        """Plan the module as `choose` would, on a CPU copy (the module is on its device already) and
        the Trainer's training DataLoader."""
        import copy

        import torch

        def cpu_copy() -> Any:
            return copy.deepcopy(pl_module).to("cpu")  # a LightningModule's copy leaves its Trainer behind

        threads = torch.get_num_threads()  # the fit keeps the threads it was given
        try:
            choice = plan_module(
                pl_module, loader, epochs=1, objective=objective or self.objective, model=cpu_copy, precision=precision
            )
        finally:
            torch.set_num_threads(threads)
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
            self._note(f"run {run.run_id} not recorded as {status}: {type(exc).__name__}: {exc}")
            return
        for note in run.notes:  # what the history could not take: said, not only kept
            if note not in self.notes:
                self._note(note)
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
        """What TrainPilot could not do or record: in `notes`, as a warning, and to the loggers."""
        self.notes.append(message)
        warnings.warn(f"TrainPilot: {message}", RuntimeWarning, stacklevel=2)
        if self._trainer is not None:
            self._log(self._trainer, {"trainpilot_notes": list(self.notes)}, noting=False)

    def _log(self, trainer: Any, params: dict[str, Any], text: str | None = None, *, noting: bool = True) -> None:
        """Give every logger of the Trainer `params` as hyperparameters (CSVLogger: hparams.yaml) and,
        to TensorBoard, the trace as text. A logger that fails is noted (`noting`: and told the note
        too, where it is not a note it failed to take already)."""
        require_lightning()
        from lightning.pytorch.loggers import TensorBoardLogger

        for logger in trainer.loggers:
            try:
                logger.log_hyperparams(params)
                if text and isinstance(logger, TensorBoardLogger):
                    logger.experiment.add_text("trainpilot/trace", text.replace("\n", "  \n"), trainer.global_step)
            except Exception as exc:  # noqa: BLE001 - one logger's failure must not stop the fit or the others
                message = f"{type(logger).__name__} did not take TrainPilot's {', '.join(params)}: {exc}"
                if noting:
                    self._note(message)
                else:
                    self.notes.append(message)
                    warnings.warn(f"TrainPilot: {message}", RuntimeWarning, stacklevel=2)


_CLASS: type | None = None


def callback_class() -> type:
    """`TrainPilotCallback`: `CallbackHooks` on Lightning's `Callback` (Lightning imported now)."""
    global _CLASS
    if _CLASS is None:
        from trainpilot.hosted.decisions import callback_on

        pl = require_lightning()
        _CLASS = callback_on(CallbackHooks, pl.Callback, "trainpilot.lightning")
    return _CLASS
