"""A training session as one rank of a distributed run: the session, composed with this strategy.

The same session as a single process (observe, decide, train, checkpoint, finish), different only
where ranks must differ or agree:
- the plan is the launch's: every rank trains its share on its own plan ("ddp-N"), no calibration
  run and no backend switch mid-run (ranks would time each other, or diverge);
- the prediction is the launch's too, as `plan --nproc` makes it (parallel/launch_forecast.py), in
  every epoch line, the result and the history row; the rank describes the machine the launch saw
  (machine/probe.note_pinned), so it reads that machine's calibration and records under its id;
- rank 0 reads a checkpoint to resume and sends it to the others (no shared disk needed), writes
  every checkpoint, and alone records the run in the history: the run is recorded once;
- a stop asked of any rank (Ctrl-C, SIGTERM) travels with the next step's all-reduce, so all ranks
  stop at the same step boundary;
- a lost peer ends the run: rank 0 first checkpoints the state at the start of the step that
  failed (no rank had applied it), so `--resume` continues from there.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

from trainpilot import events as ev
from trainpilot.energy import EST
from trainpilot.errors import CheckpointError, ConfigError
from trainpilot.parallel.ddp_plan import ddp_plan, ddp_world_size
from trainpilot.parallel.group import PeerLost, RankGroup
from trainpilot.plans import Plan
from trainpilot.run.config import SessionConfig
from trainpilot.run.plan_choice import PlanChoice, with_settings
from trainpilot.run.session import TrainingSession
from trainpilot.run.steering import Steering
from trainpilot.run.strategy import Epoch, RunStrategy, trainer_options


class RankStrategy(RunStrategy):
    can_fall_back = False  # one rank moving to another device alone would leave the others waiting

    def __init__(
        self,
        group: RankGroup,
        *,
        share_policy: str = "measured",
        threads_per_rank: int | None = None,
        heartbeat: Any = None,
        on_stop: Any = None,
    ):
        self.group = group
        self.share_policy = share_policy
        self.threads_per_rank = threads_per_rank
        self._heartbeat = heartbeat or (lambda: None)
        self._on_stop = on_stop or (lambda: None)
        self.weight_spread: float | None = None
        self.writes_checkpoints = group.info.is_leader
        self.prepare_s: Any = lambda: 0.0  # the session's preparation of the job (distributed_session sets it)
        self.launch: Any = None  # launch_forecast.LaunchForecast of the plan chosen

    def configure(self, config: SessionConfig) -> SessionConfig:
        return config if self.group.info.is_leader else replace(config, record_history=False)

    def agree_run_id(self, run_id: str) -> str:
        return self.group.broadcast(run_id, "agreeing on the run id")

    def load_resume_state(self, path: Path) -> dict[str, Any]:
        payload: Any = None
        if self.group.info.is_leader:
            try:
                payload = ("ok", super().load_resume_state(path))
            except CheckpointError as exc:
                payload = ("error", str(exc))
        payload = self.group.broadcast(payload, "sending the checkpoint to every rank")
        if payload[0] == "error":
            raise CheckpointError(payload[1])
        return payload[1]

    def first_sight(self, run_id: str, predictor: Any) -> Iterator[ev.Event]:
        yield ev.AgentStepped(
            run_id,
            "observe",
            f"rank {self.group.rank} of {self.group.world_size}: the plan is the launch's"
            " (`trainpilot headless calibrate` calibrates the single-process cost model)",
        )

    def choose_plan(self, decision: Any, config: SessionConfig, agent: Any, profile: Any, backends: Any) -> PlanChoice:
        if self.group.backend == "nccl":
            rank_plan = Plan("cuda", device=f"cuda:{self.group.info.local_rank}")
        else:
            threads = (
                config.threads
                or self.threads_per_rank
                or max(1, agent.hardware.logical_cpus // self.group.info.local_world_size)
            )
            rank_plan = Plan("cpu", threads=threads)
        # no single-process prediction weighs a rank's layout or precision: what the options ask
        # for explicitly (a precision the device lacks is refused there), else PyTorch's defaults
        rank_plan = with_settings(rank_plan, config, profile, ())
        rank_plan = self._with_loader_workers(rank_plan, agent, profile, decision)
        if rank_plan.precision == "fp16":  # DDP's backward here runs without a loss scaler
            raise ConfigError("--precision fp16 with --nproc: ranks train without a loss scaler; use bf16 or fp32")
        plan = ddp_plan(rank_plan, self.group.world_size)
        self.launch = self._predict_launch(plan, rank_plan, agent, profile)
        return PlanChoice(
            plan,
            "launch",
            f"{self.group.world_size} ranks over {self.group.backend}, {rank_plan.short_label} each"
            f" (this is rank {self.group.rank}); {self.launch.text()}",
        )

    def _predict_launch(self, plan: Plan, rank_plan: Plan, agent: Any, profile: Any) -> Any:
        from trainpilot.parallel.launch_forecast import predict_launch

        observed = (getattr(agent, "hardware_state", None) or {}).get("busy_cores", 0.0)
        return predict_launch(
            agent.predictor,
            profile,
            plan,
            rank_plan,
            world_size=self.group.world_size,
            local_world_size=self.group.info.local_world_size,
            prepare_s=float(self.prepare_s()),
            observed_busy_cores=float(observed or 0.0),
        )

    def launch_prediction(self, plan: Plan) -> Any:
        """The launch's prediction of `plan` (the forecast's `own`): the cost model predicts one
        process, not this plan."""
        prediction = getattr(self.launch, "prediction", None)
        return prediction if prediction is not None and prediction.plan == plan else None

    def _with_loader_workers(self, rank_plan: Plan, agent: Any, profile: Any, decision: Any) -> Plan:
        """A Dataset job's loader workers for this rank, on its own cores (loader_plans.py); the
        other ranks of this machine are the load it predicts them next to."""
        from trainpilot.agent.loader_plans import rank_loader_workers

        if rank_plan.backend != "cpu":
            return rank_plan
        local = self.group.info.local_world_size
        threads = int(rank_plan.threads or 1)
        workers = rank_loader_workers(
            profile,
            rank_plan,
            self.group.world_size,
            float(threads * (local - 1)),
            getattr(agent.predictor, "calibration", None),
            decision.plan.loader_workers,
        )
        return rank_plan.with_loader(workers)

    def adapt_off_reason(self) -> str | None:
        # Every rank would have to move at the same step on one decision, and the single-process
        # cost model predicts no rank's plan under another's load: off, said, rather than half-done.
        return (
            f"a run on {self.group.world_size} ranks keeps the launch's plan (the ranks would have to move"
            " together, and the cost model predicts one process, not a rank beside others)"
        )

    def predicts(self, plan: Plan) -> bool:
        """The single-process cost model does not predict a multi-rank plan: asking it would
        report the one-rank figure as the run's. The launch's prediction stands in for it
        (launch_prediction); `plan --cluster` predicts scale-out."""
        return ddp_world_size(plan) is None

    def make_trainer(
        self,
        model: Any,
        train_set: Any,
        val_set: Any,
        config: SessionConfig,
        backends: Any,
        steering: Steering,
        prepared: Any = None,
    ) -> Any:
        from trainpilot.run.distributed_trainer import DistributedTrainer

        self.trainer = DistributedTrainer(
            model,
            train_set,
            val_set,
            **trainer_options(config, backends, prepared),
            group=self.group,
            share_policy=self.share_policy,
        )
        self.trainer.wants_stop = lambda: bool(steering.stop_reason)  # this rank's stop rides on the next all-reduce
        return self.trainer

    def on_stop_requested(self) -> None:
        self._on_stop()  # bounds the wait for the next step boundary (see watchdog.expire_within)

    def stop_agreed(self, trainer: Any, stop_reason: str | None) -> str | None:
        self._heartbeat()
        if not getattr(trainer, "peer_stop", False):  # agreed in the last step's all-reduce
            return None
        return stop_reason or "another rank was stopped"

    def after_switch(self, run_id: str, trainer: Any) -> Iterator[ev.Event]:
        speeds = getattr(trainer, "speeds", None)
        if speeds is not None:
            yield ev.AgentStepped(run_id, "act", speeds.describe(), None, {"shares": speeds.to_dict()})

    def epoch_record(self, record: dict[str, Any]) -> None:
        """Make the epoch's energy the whole group's, not rank 0's alone (every rank calls this at
        the same epoch end). An estimate is per process (its CPU time), so every rank's counts; a
        measured counter (RAPL, NVML) is machine-wide, so only the first rank of each machine's."""
        joules = record.get("energy_j")
        source = str(record.get("energy_source") or "")
        estimated = EST in source
        counted = joules if joules is not None and (estimated or self.group.info.local_rank == 0) else 0.0
        total, missing = self.group.sum(
            [float(counted), 0.0 if joules is not None else 1.0], "adding up the epoch's energy"
        )
        record["energy_j"] = None if missing else total
        if source:
            record["energy_source"] = f"{source}, summed over {self.group.world_size} ranks"

    def run_epoch(self, epoch: Epoch, run_id: str, checkpoint_here: Callable[[], Iterator[ev.Event]]) -> Epoch:
        try:
            return (yield from self._telling_new_shares(epoch, run_id))
        except PeerLost as exc:
            if not self.group.info.is_leader:
                raise
            where = ""
            for event in checkpoint_here():
                yield event
                if isinstance(event, ev.CheckpointSaved):
                    where = f" at epoch {event.epoch + 1}, step {event.step}"
            raise PeerLost(f"{exc}; checkpoint saved{where}: resume with --resume {run_id}") from exc

    def _telling_new_shares(self, steps: Epoch, run_id: str) -> Epoch:
        """The epoch's events, plus an act line when the trainer re-split the batch from the
        speeds the ranks showed in the epoch before (parallel/rank_speed.refined_shares)."""
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
                if now.source == "probe":  # a new plan's probe: after_switch tells that one
                    continue
                yield ev.AgentStepped(
                    run_id, "act", f"re-split the batch: {now.describe()}", None, {"shares": now.to_dict()}
                )

    def finish(self, status: str, message: str, trainer: Any) -> tuple[str, str]:
        if status == "success" and trainer is not None:
            try:
                self.weight_spread = trainer.weight_spread()
            except PeerLost as exc:
                return "failed", str(exc)
        return status, message

    def result_extra(self, trainer: Any) -> dict[str, Any]:
        speeds = getattr(trainer, "speeds", None)
        return {
            "distributed": {
                "world_size": self.group.world_size,
                "rank": self.group.rank,
                "process_group": self.group.backend,
                "timeout_s": self.group.timeout_s,
                "share_policy": self.share_policy,
                "speeds": speeds.to_dict() if speeds is not None else None,
                "weight_max_abs_diff_across_ranks": self.weight_spread,
                "prediction": self.launch.to_dict() if self.launch is not None else None,
            }
        }


def distributed_session(config: SessionConfig, group: RankGroup, *, job: Any = None, **options: Any) -> TrainingSession:
    """This process's rank of a distributed run (`options`: RankStrategy's). `job`: the Job this
    process built (under torchrun, a script's own); None: the session loads `config.job`."""
    strategy = RankStrategy(group, **options)
    session = TrainingSession(config, strategy=strategy, job=job)
    strategy.prepare_s = lambda: session.prepare_s  # what the launch's start-up adds for this job
    session.forecast.own = strategy.launch_prediction
    return session
