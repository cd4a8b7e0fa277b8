"""A run's checkpoints: the state at a step boundary, verified finite, written atomically beside
what resuming needs; at an epoch end on a device plan also the last good state to fall back to.
A rank that does not lead writes none (its epoch records are kept in memory all the same)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trainpilot import events as ev
from trainpilot.run.state import Snapshot, Totals

if TYPE_CHECKING:
    from trainpilot.run.session import TrainingSession


class RunCheckpoints:
    def __init__(self, session: TrainingSession):
        self.s = session
        self.run_path: Path | None = None  # created by the first checkpoint: a run that fails to start leaves nothing
        self.fingerprint: dict[str, Any] | None = None  # the data a checkpoint was written for

    def kept(self) -> str:
        s = self.s
        if s.rt.checkpoint:
            return f"the last good checkpoint ({s.rt.checkpoint}) is kept"
        return "nothing was saved"

    def checkpoint_here(self) -> Iterator[ev.Event]:
        """A checkpoint of the step boundary the run is at (a lost peer: the failed step changed nothing)."""
        s = self.s
        epoch, step, totals = s.position
        return self.checkpoint(epoch, step, "interrupt", totals, force=True)

    def checkpoint(
        self,
        epoch: int,
        step: int,
        reason: str,
        totals: Totals,
        record: dict[str, Any] | None = None,
        force: bool = False,
    ) -> Iterator[ev.Event]:
        """Save the state at (epoch, step). At an epoch end the copy also becomes the in-memory
        last good state, and the epoch's record is appended only once its weights are known good."""
        s = self.s
        from trainpilot.run.checkpoint import check_finite, checkpoint_meta, save_checkpoint

        if not (s.strategy.writes_checkpoints or force):
            if record is not None:
                s.rt.epoch_records.append(record)
            return
        assert s.trainer is not None and self.run_path is not None
        # On a device plan the epoch's state is also the last good state to fall back to, so it
        # gets a private copy; on the CPU (no fallback) the live tensors are saved as they are.
        keep = reason == "epoch" and s.plan is not None and not s.plan.is_last_resort
        state = s.trainer.snapshot() if keep else s.trainer.state_dict()
        check_finite(state, epoch, step, self.kept())
        records = s.rt.epoch_records + ([record] if record is not None else [])
        meta = checkpoint_meta(
            epoch=epoch,
            step=step,
            run_id=s.run_id,
            config=s.config.to_dict(),
            plan=s.plan,
            epoch_records=records,
            totals=totals.to_dict(),
            fingerprint=self.fingerprint,
        )
        path = save_checkpoint(self.run_path, dict(state, **meta))
        s.recorder.checkpointed(epoch)
        if record is not None:
            s.rt.epoch_records.append(record)
        if keep:
            s.switcher.last_good = Snapshot(epoch, step, totals.copy(), state)
        s.rt.checkpoint = str(path)
        yield ev.CheckpointSaved(s.run_id, str(path), epoch, step, reason)
