"""`TrainPilotCallback`: times a Hugging Face Trainer's training steps, writes the run to TrainPilot's
history with its predicted and actual time (so the agent learns from Trainer runs), puts the agent's
trace and figures in the Trainer's log history, and says at each epoch's end which plan the closed
loop would move the run to — without moving it: the Trainer owns its loop.

A TrainerCallback has no hook for an exception, so the callback wraps the `train()` of the Trainer
that built it (found when the Trainer's __init__ calls `on_init_end`): an exception in `train()` is
recorded as "failed" (Ctrl-C: "interrupted") and raised on unchanged. transformers is imported only
when the callback is first used, so the class is built then, from `CallbackHooks` and transformers'
`TrainerCallback` (`callback_class()`).
"""

from __future__ import annotations

import functools
import math
import sys
import warnings
from typing import Any

from trainpilot.hosted.planned_for import plan_again, why_plan_again
from trainpilot.hosted.record import HostedRun, expect
from trainpilot.huggingface.choice import Choice, allowed_precision, last_choice, plan_model, remember
from trainpilot.huggingface.mapping import plan_of_arguments, runnable, trainer_accelerator
from trainpilot.huggingface.requirement import require_transformers
from trainpilot.units import seconds as seconds_text

PREFIX = "trainpilot_"  # the keys of TrainPilot's entries in the Trainer's log history


class CallbackHooks:
    """Times the Trainer's training and records it in TrainPilot's history.

    choice: the decision to record against; default the one `choose` made for the model, else the
    callback plans the model itself when training starts (profiling a CPU copy of it on the
    Trainer's training set and collator), so the history still gets a predicted time. A decision
    profiled at another batch size than the Trainer trains (choose() without args=), or without the
    precision the Trainer's arguments set, is planned again the same way when training starts, so
    the prediction and the epoch-end rethink are for the step the Trainer runs.

    verbose: the log history's trace in the long form (every plan's line, every reason), not the
    compact opening `trainpilot headless run` prints.

    After `train()`, `result` holds the recorded figures (run_id, status, plan, batch_size,
    predicted_s, actual_s, epochs_done, steps), `rethinks` what the closed loop would have moved the
    run to at each epoch's end, and `notes` what could not be done (each also a warning and a
    `trainpilot_note` entry in the log history). Runs in one process on one device are recorded; a
    distributed or nn.DataParallel run is not.
    """

    def __init__(self, choice: Choice | None = None, *, objective: str = "time", verbose: bool = False) -> None:
        super().__init__()
        self.choice = choice
        self.objective = objective
        self.verbose = verbose
        self.result: dict[str, Any] | None = None
        self.notes: list[str] = []
        self.rethinks: list[str] = []
        self._run: HostedRun | None = None
        self._choice_used: Choice | None = None
        self._state: Any = None
        self._device: Any = None
        self._paused_for: str | None = None  # "evaluate" | "save": what the clock waits out

    # ------------------------------------------------------------------ the Trainer's train()

    def on_init_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        trainer = _calling_trainer()
        if trainer is not None:
            self._watch_train(trainer)

    def _watch_train(self, trainer: Any) -> None:
        """Record an exception out of `trainer.train()`: wrap that Trainer's own `train` (once)."""
        train = trainer.train
        if getattr(train, "_trainpilot_watched", False):
            return

        @functools.wraps(train)
        def watched(*args: Any, **kwargs: Any) -> Any:
            try:
                return train(*args, **kwargs)
            except BaseException as exc:
                self.failed(exc)
                raise

        watched._trainpilot_watched = True  # type: ignore[attr-defined]
        trainer.train = watched

    def failed(self, exception: BaseException) -> None:
        """Record the running training as failed (interrupted for Ctrl-C); the train() wrapper calls
        it, and so may a caller that drives the Trainer's loop some other way."""
        if self._run is not None:
            self._run.clock.stop()  # the device may be what failed: no waiting on it
        self._finish("interrupted" if isinstance(exception, KeyboardInterrupt) else "failed")

    # ------------------------------------------------------------------ training's start and end

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._run, self.result, self._state, self._paused_for = None, None, state, None
        self.rethinks = []
        if args.world_size > 1 or args.n_gpu > 1:
            self._note("not recorded: TrainPilot records runs in one process on one device; this Trainer uses several")
            return
        planning: list[str] = []  # what the callback did about the decision before training
        try:
            self._run = self._start(args, state, kwargs.get("model"), kwargs.get("train_dataloader"), planning)
        except Exception as exc:  # noqa: BLE001 - bookkeeping must never stop the user's training
            self._note(f"not recorded: {type(exc).__name__}: {exc}")
            return
        run, choice = self._run, self._choice_used
        assert choice is not None
        ex = run.expectation
        trace = [*(choice.trace if self.verbose else choice.opening()), *planning, *ex.notes]
        planned = ex.planned_s
        trace.append(f"this Trainer: {ex.text()}")
        self._log(
            state,
            {
                "run_id": run.run_id,
                "plan": ex.plan.label,
                "batch_size": ex.profile.batch_size,
                "steps": int(ex.planned_steps) if math.isfinite(ex.planned_steps) else None,
                "predicted_s": planned,
                "confidence": choice.confidence,
                "trace": trace,
            },
        )

    def _start(self, args: Any, state: Any, model: Any, loader: Any, planning: list[str]) -> HostedRun:
        import torch

        from trainpilot.run.config import new_run_id

        plan = plan_of_arguments(args, torch.get_num_threads())
        batch = _train_batch_size(args, state, loader)
        choice = self.choice if self.choice is not None else last_choice(model)
        if choice is None:
            choice = self._plan_here(args, model, loader, batch, precision="fp32")
        elif (why := why_plan_again(choice, plan, batch)) is not None:
            choice = self._plan_again(args, model, loader, batch, choice, why, planning)
        self._choice_used = choice
        self._device = args.device
        accumulation = max(int(args.gradient_accumulation_steps), 1)
        per_epoch = _batches_per_epoch(loader, choice)
        # the Trainer has worked out its optimizer steps (state.max_steps) from its epochs or max_steps
        epochs_left = None if args.max_steps > 0 else max(math.ceil(float(args.num_train_epochs)), 1)
        steps_left = max(state.max_steps - state.global_step, 0) * accumulation if state.max_steps > 0 else None
        expectation = expect(choice, plan, steps_per_epoch=per_epoch, epochs_left=epochs_left, steps_left=steps_left)
        run = HostedRun(expectation, new_run_id())
        run.open()
        for note in run.notes:  # the "running" row the history could not take
            self._note(note)
        return run

    def _plan_again(
        self, args: Any, model: Any, loader: Any, batch: int | None, choice: Choice, why: str, planning: list[str]
    ) -> Choice:
        """The decision planned again for what this Trainer runs (hosted/planned_for.py)."""

        def here() -> Choice:
            return self._plan_here(args, model, loader, batch, precision=choice.precision, objective=choice.objective)

        return plan_again(here, choice, why, planning, self._note)

    def _plan_here(
        self, args: Any, model: Any, loader: Any, batch: int | None, *, precision: str, objective: str | None = None
    ) -> Choice:
        """Plan the model as `choose` would, on a CPU copy (the model is on its device already) and the
        Trainer's training set, collator and batch size."""
        import copy

        import torch

        if model is None or loader is None:
            raise ValueError("the Trainer gave the callback no model or training DataLoader to plan")
        dataset = getattr(loader, "dataset", None)
        collator = getattr(loader, "collate_fn", None)
        if dataset is None:
            raise ValueError(f"the training DataLoader ({type(loader).__name__}) has no dataset to profile")

        def cpu_copy() -> Any:
            return copy.deepcopy(model).to("cpu")

        allowed, note = allowed_precision(args, precision)
        threads = torch.get_num_threads()  # the Trainer's run keeps the threads it was given
        try:
            choice = plan_model(
                model,
                dataset,
                args=args,
                data_collator=collator,
                epochs=max(math.ceil(float(args.num_train_epochs)), 1),
                objective=objective or self.objective,
                precision=allowed,
                notes=[note] if note else [],
                profiled=cpu_copy,
                batch_size=batch,
            )
        finally:
            torch.set_num_threads(threads)
        remember(model, choice)
        return choice

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._finish("success")

    def _finish(self, status: str) -> None:
        run = self._run
        if run is None or run.summary is not None:
            return
        if run.clock.running:
            run.clock.stop(self._device)
        try:
            self.result = run.finish(status)
        except Exception as exc:  # noqa: BLE001 - bookkeeping must never stop the user's training
            self._note(f"run {run.run_id} not recorded as {status}: {type(exc).__name__}: {exc}")
            return
        for note in run.notes:  # what the history could not take: said, not only kept
            if note not in self.notes:
                self._note(note)
        result = self.result
        self._log(
            self._state,
            {
                "status": status,
                "predicted_s": result["predicted_s"],
                "actual_s": result["actual_s"],
                "epochs_done": result["epochs_done"],
            },
        )

    # ------------------------------------------------------------------ the training clock

    def on_epoch_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self._run is not None:
            self._paused_for = None
            self._run.clock.start()

    def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self._run is not None and self._paused_for != "epoch":
            self._paused_for = None
            self._run.clock.start()  # again after a pause no hook ended (a save the "best" strategy skipped)

    def on_substep_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self._run is not None:
            self._run.clock.steps += 1  # a batch whose gradients accumulate

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self._run is None:
            return
        self._run.clock.steps += 1  # the batch the optimizer steps on
        # evaluation and checkpoints run next, before the next batch loads: not training time
        if control.should_save or control.should_evaluate:
            self._run.clock.stop(self._device)
            self._paused_for = "save" if control.should_save else "evaluate"

    def on_evaluate(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self._run is not None and self._paused_for == "evaluate":
            self._resume()

    def on_save(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self._run is not None and self._paused_for == "save":
            self._resume()

    def _resume(self) -> None:
        assert self._run is not None
        self._paused_for = None
        self._run.clock.start()

    def on_epoch_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self._run is None:
            return
        self._run.clock.stop(self._device)
        self._paused_for = "epoch"  # the epoch's evaluation and checkpoint: until the next epoch begins
        self._run.clock.epochs += 1
        self._rethink(state)

    def _rethink(self, state: Any) -> None:
        """What the closed loop would do now (hosted/rethink.py): said, never done."""
        from trainpilot.hosted.rethink import rethink_hosted

        run, choice = self._run, self._choice_used
        if run is None or choice is None:
            return
        current, taken = run.expectation.plan, trainer_accelerator()
        try:
            decision = rethink_hosted(run, choice, lambda plan: runnable(plan, taken))
        except Exception as exc:  # noqa: BLE001 - a report must never stop the user's training
            self._note(f"no rethink after epoch {run.clock.epochs}: {type(exc).__name__}: {exc}")
            return
        if decision is None:
            return
        text = decision.text()
        if decision.moves and decision.best is not None:
            text = (
                f"TrainPilot would move this run to {decision.best.plan.label}, predicted {decision.factor:.1f}x"
                f" faster than the measured pace for the remaining {seconds_text(decision.current_s)}."
                f" The Trainer owns its loop, so the run stays on {current.label}: choose() again for the next run"
            )
        self.rethinks.append(text)
        self._log(state, {"rethink": text, "moves": decision.moves})

    # ------------------------------------------------------------------ telling the user

    def _note(self, message: str) -> None:
        """What TrainPilot could not do or record: in `notes`, as a warning, and in the log history."""
        self.notes.append(message)
        warnings.warn(f"TrainPilot: {message}", RuntimeWarning, stacklevel=2)
        self._log(self._state, {"note": message})

    def _log(self, state: Any, figures: dict[str, Any]) -> None:
        """One entry in the Trainer's log history (saved with its trainer_state.json), at the step it
        was written. Straight into the history, not through on_log: its reporters take numbers only."""
        if state is None:
            return
        entry = {f"{PREFIX}{key}": value for key, value in figures.items()}
        state.log_history.append({**entry, "step": state.global_step})


def _train_batch_size(args: Any, state: Any, loader: Any) -> int | None:
    """The batch the Trainer trains on: the one its loop set (auto_find_batch_size may have lowered
    it), else its DataLoader's, else the arguments'."""
    for found in (getattr(state, "train_batch_size", None), getattr(loader, "batch_size", None)):
        if isinstance(found, int) and found > 0:
            return found
    size = getattr(args, "train_batch_size", None)
    return int(size) if size else None


def _batches_per_epoch(loader: Any, choice: Choice) -> float:
    try:
        return float(len(loader))
    except TypeError:  # no length: the profiled training set's
        return float(choice.profile.steps_per_epoch)


def _calling_trainer() -> Any:
    """The transformers Trainer whose __init__ (or loop) is calling this callback, from the stack:
    a TrainerCallback is given the Trainer's parts, never the Trainer."""
    transformers = sys.modules.get("transformers")
    trainer_type = getattr(transformers, "Trainer", None) if transformers is not None else None
    if trainer_type is None:
        return None
    frame: Any = sys._getframe(1)
    depth = 0
    while frame is not None and depth < 12:
        candidate = frame.f_locals.get("self")
        if isinstance(candidate, trainer_type):
            return candidate
        frame, depth = frame.f_back, depth + 1
    return None


_CLASS: type | None = None


def callback_class() -> type:
    """`TrainPilotCallback`: `CallbackHooks` on transformers' `TrainerCallback` (transformers imported now)."""
    global _CLASS
    if _CLASS is None:
        from trainpilot.hosted.decisions import callback_on

        transformers = require_transformers()
        _CLASS = callback_on(CallbackHooks, transformers.TrainerCallback, "trainpilot.huggingface")
    return _CLASS
