"""The epochs of a run: step by step (or a whole epoch in one call, where the plan's backend trains
that way), requests from other threads applied at each step boundary, an epoch closed by
validation, its record and its checkpoint. A device fault falls back to the CPU from the last good
state and the lost steps are redone.

The loop belongs to one session and works on its state, as a training loop does on its trainer's.
"""

from __future__ import annotations

import math
import time
from collections.abc import Generator, Iterator
from typing import TYPE_CHECKING, Any

from trainpilot import events as ev
from trainpilot.errors import TrainingDiverged, describe_exception
from trainpilot.run.plan_choice import plan_for, runs_natively
from trainpilot.run.result import epoch_record, success_message
from trainpilot.run.state import Segment, Totals

if TYPE_CHECKING:
    from trainpilot.run.session import TrainingSession


class EpochLoop:
    def __init__(self, session: TrainingSession, load: Any):
        self.s = session
        self._load = load  # the load observed before deciding: predictions of this run are made for it
        self._epoch_mark: Any = None  # the energy meter's reading when the epoch in progress began

    @property
    def load(self) -> Any:
        """The load the current plan's predictions are for: the one observed before deciding, or the
        one the closed loop re-planned under since."""
        adapted = self.s.adapt.load
        return adapted if adapted is not None else self._load

    def run(self, epoch: int, first_step: int, totals: Totals) -> Iterator[ev.Event]:
        s = self.s
        segments = [Segment(s.plan)]  # type: ignore[arg-type]
        while epoch < s.config.epochs:  # type: ignore[operator]
            self._epoch_mark = s.energy_meter.mark() if s.energy_meter is not None else None
            try:
                stopped = yield from s.strategy.run_epoch(
                    self.epoch(epoch, first_step, totals, segments), s.run_id, s.checkpoints.checkpoint_here
                )
            except Exception as exc:
                if not s.switcher.can_fall_back():
                    raise
                # A device fault (an exception from the device, out of memory, a failed conversion,
                # NaNs only the device produced): back to the last good state, on the CPU.
                yield from s.switcher.fall_back(f"{s.plan.short_label} failed: {describe_exception(exc)}", self.load)  # type: ignore[union-attr]
                s.adapt.pin("a fallback")  # the agent does not move the run back to the plan that failed
                epoch, first_step, totals = s.position
                segments.append(Segment(s.plan))  # type: ignore[arg-type]
                continue
            if stopped:
                return
            epoch, first_step, totals = epoch + 1, 0, Totals()
            segments = [Segment(s.plan)]  # type: ignore[arg-type]
        metric = s.prepared.objective.metric_name if s.prepared is not None else "accuracy"
        yield s.finish("success", success_message(s.config, s.plan, s.rt, metric))  # type: ignore[arg-type]

    def epoch(
        self, epoch: int, first_step: int, totals: Totals, segments: list[Segment]
    ) -> Generator[ev.Event, None, bool]:
        """Steps `first_step`.. of `epoch`, then validation and the epoch checkpoint. True when the
        run was stopped (checkpointed and finished as interrupted)."""
        s, trainer = self.s, self.s.trainer
        steps_per_epoch = trainer.steps_per_epoch
        epoch_start = time.perf_counter()
        last_emit = float("-inf")  # an epoch's first step always goes: a reader sees each epoch begin
        for step_index in range(first_step, steps_per_epoch):
            # Step boundary: apply what other threads asked for.
            s.position = (epoch, step_index, totals)
            yield from self.apply_commands(segments)
            yield from s.adapt.at_boundary(segments)
            whole = step_index == first_step and s.trains_whole_epochs()  # an epoch in one call starts at its start
            reason = s.strategy.stop_agreed(trainer, s.steering.stop_reason)
            if reason:
                s.steering.stop(reason)
                yield from s.checkpoints.checkpoint(epoch, step_index, "interrupt", totals)
                at = f"epoch {epoch + 1}" + ("" if whole else f", step {step_index}")
                yield s.finish(
                    "interrupted", f"stopped ({s.steering.stop_reason}) at {at}; resume with --resume {s.run_id}"
                )
                return True
            if whole:
                assert s.plan is not None  # trains_whole_epochs() said so
                start = time.perf_counter()
                loss = s.backend_of(s.plan).train_epoch(
                    trainer.full_model, trainer.train_set, batch_size=s.config.batch_size, lr=s.config.lr
                )
                segments[-1].steps += steps_per_epoch
                segments[-1].seconds += time.perf_counter() - start
                # Core ML reports the loss, not the accuracy: measure it on the training set with the updated weights.
                yield from self.close_epoch(epoch, segments, loss, trainer.accuracy_on(trainer.train_set))
                return False
            result = trainer.train_step(epoch, step_index)
            s.adapt.stepped(result.seconds)
            if not math.isfinite(result.loss):
                raise TrainingDiverged(
                    f"the loss became {result.loss} at epoch {epoch + 1}, step {step_index + 1} (try a lower --lr);"
                    f" {s.checkpoints.kept()}"
                )
            segments[-1].steps += 1
            segments[-1].seconds += result.seconds
            totals.loss_sum += result.loss * result.seen
            totals.correct += result.correct
            totals.seen += result.seen
            now = time.perf_counter()
            if now - last_emit >= s.progress_interval_s or result.step == steps_per_epoch:
                last_emit = now
                remaining = (s.config.epochs - epoch - 1) * steps_per_epoch + (steps_per_epoch - result.step)  # type: ignore[operator]
                eta = s.forecast.eta(s.plan, remaining, steps_per_epoch, s.rt.epoch_records, self.load)  # type: ignore[arg-type]
                low, high = s.forecast.bounds(s.plan, eta)
                yield ev.StepProgressed(
                    s.run_id, epoch + 1, result.step, steps_per_epoch, result.loss, now - epoch_start, eta, low, high
                )
        trainer.synchronize()
        metric = totals.correct / max(totals.seen, 1) if getattr(trainer, "has_metric", True) else None
        yield from self.close_epoch(epoch, segments, totals.loss_sum / max(totals.seen, 1), metric)
        return False

    def close_epoch(
        self, epoch: int, segments: list[Segment], loss: float, accuracy: float | None
    ) -> Iterator[ev.Event]:
        """Validation, the epoch record, its checkpoint, and the EpochTimed event."""
        s = self.s
        assert s.plan is not None  # the epoch ran on it
        # The epoch's training steps, as its time is (validation is outside both).
        energy = (
            s.energy_meter.since(self._epoch_mark)
            if s.energy_meter is not None and self._epoch_mark is not None
            else None
        )
        val_acc = s.rt.val_accuracy = s.trainer.evaluate()
        if hasattr(s.trainer, "end_epoch"):
            s.trainer.end_epoch()  # the job's LR scheduler, before the checkpoint keeps its state
        predicted = s.forecast.segments_predicted(segments, s.trainer.steps_per_epoch, self.load)
        record = epoch_record(
            epoch=epoch + 1,
            loss=loss,
            accuracy=accuracy,
            val_accuracy=val_acc,
            predicted=predicted,
            bounds=s.forecast.segments_bounds(segments, predicted),
            segments=segments,
            plan=s.plan,
            energy=energy,
        )
        record["val_loss"] = getattr(s.trainer, "last_val_loss", None)
        s.strategy.epoch_record(record)
        yield from s.checkpoints.checkpoint(epoch + 1, 0, "epoch", Totals(), record)
        s.rt.train_seconds += record["actual_s"]
        yield ev.EpochTimed(
            s.run_id,
            epoch + 1,
            record["loss"],
            record["accuracy"],
            val_acc,
            predicted,
            record["actual_s"],
            s.plan,
            tuple(record["segments"]),
            energy_j=record["energy_j"],
            energy_source=record["energy_source"],
            predicted_low_s=record["predicted_low_s"],
            predicted_high_s=record["predicted_high_s"],
            val_loss=record["val_loss"],
        )

    def apply_commands(self, segments: list[Segment]) -> Iterator[ev.Event]:
        s = self.s
        for kind, arg in s.steering.pending():
            if kind == "pause":
                yield ev.SessionPaused(s.run_id, len(s.rt.epoch_records) + 1, s.position[1])  # steps done this epoch
            elif kind == "resume":
                yield ev.SessionResumed(s.run_id, len(s.rt.epoch_records) + 1, s.position[1])
            elif kind == "override":
                backend, threads, mode, avail, memory_format, precision = arg
                if not avail:
                    yield ev.OverrideRefused(s.run_id, backend, avail.reason)
                    continue
                plan = plan_for(
                    s.backend_of(backend), s.logical_cpus, s.predictions, threads, mode, memory_format, precision
                )
                native = runs_natively(plan)
                if not native:
                    yield ev.OverrideRefused(s.run_id, backend, native.reason)
                    continue
                if plan != s.plan:
                    yield from s.switcher.switch(plan, "user", f"user override to {plan.short_label}", None, self.load)
                    segments.append(Segment(s.plan))  # type: ignore[arg-type]
                yield from s.adapt.user_moved()  # the user's plan, even the one it was on: pinned
            elif kind == "release":
                yield from s.adapt.release(segments)
