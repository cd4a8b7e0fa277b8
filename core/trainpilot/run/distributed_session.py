"""A training session as one rank of a distributed run.

The same session as a single process (observe, decide, train, checkpoint, finish), different only
where ranks must differ or agree:
- the plan is the launch's: every rank trains its share on its own plan ("ddp-N"), no calibration
  run and no backend switch mid-run (ranks would time each other, or diverge);
- rank 0 reads a checkpoint to resume and sends it to the others (no shared disk needed), writes
  every checkpoint, and alone records the run in the history: the run is recorded once;
- a stop asked of any rank (Ctrl-C, SIGTERM) travels with the next step's all-reduce, so all ranks
  stop at the same step boundary;
- a lost peer ends the run: rank 0 first checkpoints the state at the start of the step that
  failed (no rank had applied it), so `--resume` continues from there.
"""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any, Generator, Iterator

from trainpilot import events as ev
from trainpilot.energy import EST
from trainpilot.errors import CheckpointError
from trainpilot.plans import Plan
from trainpilot.run.session import SessionConfig, TrainingSession
from trainpilot.parallel.group import PeerLost, RankGroup
from trainpilot.parallel.ddp_plan import ddp_plan, ddp_world_size


class DistributedSession(TrainingSession):
    def __init__(self, config: SessionConfig, group: RankGroup, *, share_policy: str = "measured", threads_per_rank: int | None = None, heartbeat: Any = None, on_stop: Any = None, **kwargs: Any):
        if not group.info.is_leader:
            config = replace(config, record_history=False)
        super().__init__(config, **kwargs)
        self.group = group
        self.share_policy = share_policy
        self.threads_per_rank = threads_per_rank
        self._heartbeat = heartbeat or (lambda: None)
        self._on_stop = on_stop or (lambda: None)
        self.weight_spread: float | None = None
        self.run_id = group.broadcast(self.run_id, "agreeing on the run id")

    @property
    def is_leader(self) -> bool:
        return self.group.info.is_leader

    # ---------------------------------------------------------------- where ranks differ

    def _load_resume_state(self, path: Path) -> dict[str, Any]:
        payload: Any = None
        if self.is_leader:
            try:
                payload = ("ok", super()._load_resume_state(path))
            except CheckpointError as exc:
                payload = ("error", str(exc))
        payload = self.group.broadcast(payload, "sending the checkpoint to every rank")
        if payload[0] == "error":
            raise CheckpointError(payload[1])
        return payload[1]

    def _calibrate_on_first_sight(self, predictor: Any) -> Iterator[ev.Event]:
        yield ev.AgentStepped(self.run_id, "observe", f"rank {self.group.rank} of {self.group.world_size}: the plan is the launch's (`trainpilot headless calibrate` calibrates the single-process cost model)")

    def _act_plan(self, decision: Any, cfg: SessionConfig, agent: Any, profile: Any, load: Any) -> tuple[Plan, str, str]:
        if self.group.backend == "nccl":
            rank_plan = Plan("cuda", device=f"cuda:{self.group.info.local_rank}")
        else:
            threads = cfg.threads or self.threads_per_rank or max(1, agent.hardware.logical_cpus // self.group.info.local_world_size)
            rank_plan = Plan("cpu", threads=threads)
        plan = ddp_plan(rank_plan, self.group.world_size)
        return plan, "launch", f"{self.group.world_size} ranks over {self.group.backend}, {rank_plan.label} each (this is rank {self.group.rank})"

    def _predicted_epoch_s(self, plan: Plan, load: Any) -> float | None:
        """The single-process cost model does not predict a multi-rank plan: asking it would
        report the one-rank figure as the run's. `plan --cluster` predicts scale-out."""
        if ddp_world_size(plan) is not None:
            return None
        return super()._predicted_epoch_s(plan, load)

    def _make_trainer(self, trainer_cls: Any, model: Any, train_set: Any, val_set: Any) -> Any:
        from trainpilot.run.distributed_trainer import DistributedTrainer

        cfg = self.config
        trainer = DistributedTrainer(model, train_set, val_set, batch_size=cfg.batch_size, lr=cfg.lr, seed=cfg.seed, backends=self._backends, group=self.group, share_policy=self.share_policy)
        trainer.wants_stop = lambda: bool(self._stop_reason)
        return trainer

    def _can_fall_back(self) -> bool:
        return False  # one rank moving to another device alone would leave the others waiting

    def request_stop(self, reason: str = "user") -> None:
        super().request_stop(reason)
        self._on_stop()  # bounds the wait for the next step boundary (see watchdog.expire_within)

    def _stop_requested(self) -> bool:
        self._heartbeat()
        asked = bool(getattr(self.trainer, "peer_stop", False))  # agreed in the last step's all-reduce
        if asked and not self._stop_reason:
            with self._lock:
                self._stop_reason = self._stop_reason or "another rank was stopped"
        return asked

    def _switch(self, plan: Plan, source: str, reason: str, confidence: float | None, load: Any) -> Iterator[ev.Event]:
        yield from super()._switch(plan, source, reason, confidence, load)
        speeds = getattr(self.trainer, "speeds", None)
        if speeds is not None:
            yield ev.AgentStepped(self.run_id, "act", speeds.describe(), None, {"shares": speeds.to_dict()})

    def _checkpoint(self, epoch: int, step: int, reason: str, totals: Any, record: dict[str, Any] | None = None) -> Iterator[ev.Event]:
        if record is not None:
            self._whole_run_energy(record)
        if self.is_leader:
            yield from super()._checkpoint(epoch, step, reason, totals, record)
        elif record is not None:
            self.rt.epoch_records.append(record)

    def _train_epoch(self, epoch: int, first_step: int, totals: Any, segments: list[Any], load: Any) -> Generator[ev.Event, None, bool]:
        try:
            return (yield from self._telling_new_shares(super()._train_epoch(epoch, first_step, totals, segments, load)))
        except PeerLost as exc:
            if self.is_leader:
                at_epoch, at_step, at_totals = self._position
                yield from super()._checkpoint(at_epoch, at_step, "interrupt", at_totals)
                raise PeerLost(f"{exc}; checkpoint saved at epoch {at_epoch + 1}, step {at_step}: resume with --resume {self.run_id}") from exc
            raise

    def _telling_new_shares(self, steps: Generator[ev.Event, None, bool]) -> Generator[ev.Event, None, bool]:
        """The epoch's events, plus an act line when the trainer re-split the batch from the
        speeds the ranks showed in the epoch before (distributed/speed.refined_shares)."""
        shown = getattr(self.trainer, "speeds", None)
        while True:
            try:
                event = next(steps)
            except StopIteration as done:
                return done.value
            yield event
            now = getattr(self.trainer, "speeds", None)
            if now is not None and now is not shown:
                shown = now
                if now.source == "probe":  # a new plan's probe: _switch tells that one
                    continue
                yield ev.AgentStepped(self.run_id, "act", f"re-split the batch: {now.describe()}", None, {"shares": now.to_dict()})

    def _whole_run_energy(self, record: dict[str, Any]) -> None:
        """Make the epoch's energy the whole group's, not rank 0's alone (every rank calls this at
        the same epoch end). An estimate is per process (its CPU time), so every rank's counts; a
        measured counter (RAPL, NVML) is machine-wide, so only the first rank of each machine's."""
        joules = record.get("energy_j")
        source = str(record.get("energy_source") or "")
        estimated = EST in source
        counted = joules if joules is not None and (estimated or self.group.info.local_rank == 0) else 0.0
        total, missing = self.group.sum([float(counted), 0.0 if joules is not None else 1.0], "adding up the epoch's energy")
        record["energy_j"] = None if missing else total
        if source:
            record["energy_source"] = f"{source}, summed over {self.group.world_size} ranks"

    # ---------------------------------------------------------------- the result

    def _finish(self, status: str, message: str) -> ev.RunFinished:
        if status == "success" and self.trainer is not None:
            try:
                self.weight_spread = self.trainer.weight_spread()
            except PeerLost as exc:
                status, message = "failed", str(exc)
        return super()._finish(status, message)

    def result(self, status: str, message: str) -> dict[str, Any]:
        out = super().result(status, message)
        speeds = getattr(self.trainer, "speeds", None)
        out["distributed"] = {
            "world_size": self.group.world_size,
            "rank": self.group.rank,
            "process_group": self.group.backend,
            "timeout_s": self.group.timeout_s,
            "share_policy": self.share_policy,
            "speeds": speeds.to_dict() if speeds is not None else None,
            "weight_max_abs_diff_across_ranks": self.weight_spread,
        }
        return out
