"""The Python API: `plan(job)` says what the agent would do and why; `fit(job)` does it.

    import trainpilot
    job = trainpilot.Job(model, (X, y), loss=torch.nn.functional.mse_loss)
    print(trainpilot.plan(job).chosen["label"])
    result = trainpilot.fit(job, epochs=3)

A fit is the same session `trainpilot headless run` runs: the agent's decision and trace,
checkpoints and resume, the history it learns from, fallback, overrides from another thread
(`Control`), and Ctrl-C (checkpoint, then stop).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trainpilot.errors import ConfigError, DatasetError, JobError, TrainPilotError, WorkloadError
from trainpilot.job.spec import Job
from trainpilot.plans import Plan

USER_ERRORS = (JobError, WorkloadError, DatasetError, ConfigError)


@dataclass(frozen=True)
class PlanReport:
    """Every plan with its predicted time, 80 % interval and energy; the choice, its confidence and
    the reasons (`to_dict()` is what `trainpilot headless plan --json` prints)."""

    data: dict[str, Any]

    @property
    def chosen(self) -> dict[str, Any]:
        return dict(self.data["chosen"])

    @property
    def plan(self) -> Plan:
        return Plan.from_dict(self.data["chosen"])

    @property
    def confidence(self) -> float:
        return float(self.data["chosen"]["confidence"])

    @property
    def plans(self) -> list[dict[str, Any]]:
        return list(self.data["plans"])

    @property
    def reasoning(self) -> list[str]:
        return list(self.data["reasoning"])

    @property
    def trace(self) -> list[str]:
        return list(self.data["trace"])

    def to_dict(self) -> dict[str, Any]:
        return dict(self.data)


@dataclass(frozen=True)
class FitResult:
    """A finished run. `to_dict()` holds the `--json` fields (docs/json.md): status, run_id, plan,
    predicted_s, actual_s, their intervals, energy, loss, metric, epochs, checkpoint."""

    data: dict[str, Any]
    model: Any = field(default=None, repr=False)  # the trained nn.Module
    events: tuple[Any, ...] = field(default=(), repr=False)

    @property
    def status(self) -> str:
        return str(self.data["status"])

    @property
    def ok(self) -> bool:
        return self.status == "success"

    @property
    def run_id(self) -> str:
        return str(self.data["run_id"])

    @property
    def plan(self) -> Plan | None:
        return Plan.from_dict(self.data["plan"]) if self.data.get("plan") else None

    @property
    def predicted_s(self) -> float | None:
        return self.data.get("predicted_s")

    @property
    def actual_s(self) -> float | None:
        return self.data.get("actual_s")

    @property
    def message(self) -> str:
        return str(self.data.get("message", ""))

    def to_dict(self) -> dict[str, Any]:
        return dict(self.data)


class Control:
    """Steer a `fit` from another thread: `override("cpu", threads=1)`, `release()` (hand the run
    back to the agent), `pause()`, `resume()`, `stop()`. Requests made before the run starts wait
    for it; each applies at a step boundary."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._session: Any = None
        self._waiting: list[Callable[[Any], Any]] = []

    def _bind(self, session: Any) -> None:
        with self._lock:
            self._session = session
            waiting, self._waiting = self._waiting, []
        for call in waiting:
            call(session)

    def _do(self, call: Callable[[Any], Any]) -> Any:
        with self._lock:
            if self._session is None:
                self._waiting.append(call)
                return None
            session = self._session
        return call(session)

    def override(
        self,
        backend: str,
        threads: int | None = None,
        mode: str | None = None,
        memory_format: str | None = None,
        precision: str | None = None,
    ) -> Any:
        """Move the run to another plan (`memory_format` "contiguous" | "channels_last", `precision`
        "fp32" | "bf16" | "fp16"; None: the fastest predicted); the Availability says whether it
        can run here (None: queued). Weights and optimizer state are converted at the next step."""
        return self._do(lambda s: s.override_backend(backend, threads, mode, memory_format, precision))

    def release(self) -> None:
        """Hand an overridden run back to the agent: it decides again under the load now seen (an
        override pins the plan; the agent never fights the user)."""
        self._do(lambda s: s.release())

    def pause(self) -> None:
        self._do(lambda s: s.pause())

    def resume(self) -> None:
        self._do(lambda s: s.resume())

    def stop(self, reason: str = "user") -> None:
        self._do(lambda s: s.request_stop(reason))

    @property
    def stop_requested(self) -> bool:
        """Whether the run was asked to stop (by `stop()`, Ctrl-C or another thread)."""
        with self._lock:
            session = self._session
        return session is not None and session.steering.stop_reason is not None


def _as_job(job: Job | str) -> Job:
    if isinstance(job, Job):
        return job
    if isinstance(job, (str, Path)):
        from trainpilot.job.job_file import load_job

        return load_job(str(job))
    raise JobError(f"expected a trainpilot.Job (or 'file.py:make_job'), got {type(job).__name__}")


def plan(
    job: Job | str,
    *,
    epochs: int = 3,
    objective: str = "time",
    val_fraction: float = 0.1,
    hardware: str | Path | None = None,
    auto_calibrate: bool = True,
    progress: Callable[[float, str], None] | None = None,
    memory_format: str = "auto",
    precision: str = "fp32",
) -> PlanReport:
    """Predict every plan for `job` and decide, without training. `hardware`: a described
    machine (a .toml path or a shipped profile's name) to plan for instead of this one.
    memory_format: auto | contiguous | channels_last; precision: fp32 | auto | bf16 | fp16
    (mixed precision changes the numerics, so fp32 unless asked)."""
    from trainpilot.agent.planning import plan_job

    data = plan_job(
        "job",
        None,
        epochs=epochs,
        hardware_file=hardware,
        auto_calibrate=auto_calibrate,
        progress=progress,
        objective=objective,
        job=_as_job(job),
        val_fraction=val_fraction,
        memory_format=memory_format,
        precision=precision,
    )
    return PlanReport(data)


def fit(
    job: Job | str,
    *,
    epochs: int | None = None,
    backend: str = "auto",
    threads: int | None = None,
    workers: int | None = None,
    objective: str = "time",
    resume: str | None = None,
    on_event: Callable[[Any], None] | None = None,
    control: Control | None = None,
    lr: float = 1e-3,
    seed: int = 0,
    val_fraction: float = 0.1,
    compile: bool = False,
    record_history: bool = True,
    memory_format: str = "auto",
    precision: str = "fp32",
    adapt: str = "on",
    nproc: int | None = None,
    shares: str = "measured",
    timeout: float = 120.0,
) -> FitResult:
    """Train `job` on the plan the agent picks (or `backend`/`threads`), and return the result.

    epochs: default 3, or with `resume` the resumed run's own count. workers: pin the DataLoader
    worker count (default: the agent chooses it with the threads, for a Dataset's data). resume: a run id (or "last").
    memory_format: auto (the agent weighs channels_last for a convolutional model) | contiguous |
    channels_last. precision: fp32 (default: it keeps the numerics) | auto | bf16 | fp16; mixed
    precision runs only where the device has it natively.
    adapt: on (default: the agent keeps deciding while the run trains, moving it when the load or the
    steps' pace changes and a move pays, and settling a near tie on the run's own steps) | verify
    (near ties only) | off (one decision before the first step). An override through `control`
    pins the plan until `control.release()`.
    nproc: train as N ranks on this machine (torch.distributed, DDP; docs/jobs.md): `job` must then
    be a reference, "train.py:make_job", which each rank builds itself; `shares` (measured | equal)
    splits each batch by the ranks' speed or evenly; `timeout` is how long a rank waits for the
    others. In a process torchrun started (RANK, WORLD_SIZE set), fit trains as that rank.
    on_event: called with every event of the session (trainpilot.events). Ctrl-C checkpoints and
    stops the run (status "interrupted"; `resume=run_id` continues it); a second Ctrl-C raises.
    State (history, checkpoints, calibration) lives under TRAINPILOT_HOME, as for the CLI.
    A job that cannot train as given raises JobError (nothing is recorded as a success); a run
    that fails while training returns status "failed" with the reason in `message`.
    """
    from trainpilot.parallel.rank_env import RankInfo
    from trainpilot.run.config import SessionConfig, validate_config
    from trainpilot.run.session import TrainingSession
    from trainpilot.run.signal_stop import SignalStop

    rank = RankInfo.from_env()
    if nproc is not None and nproc < 1:
        raise ValueError(f"nproc must be at least 1, got {nproc}")
    from trainpilot.parallel.rank_speed import SHARE_POLICIES

    if shares not in SHARE_POLICIES:
        raise ValueError(f"shares must be one of {', '.join(SHARE_POLICIES)}, got {shares!r}")
    if rank is None and nproc is not None and nproc > 1 and not isinstance(job, (str, Path)):
        raise JobError(
            "fit(nproc=N) needs the job as a reference, 'train.py:make_job': each rank builds the job"
            " itself, and a Job object in this process cannot be sent to them"
        )
    if isinstance(job, (str, Path)) and (rank is not None or (nproc or 1) > 1):
        from trainpilot.job.job_file import absolute_reference

        job = absolute_reference(str(job))  # a rank may start in another directory
    the_job = _as_job(job)
    config = validate_config(
        SessionConfig(
            model=the_job.title,
            dataset=None,
            epochs=epochs,
            batch_size=the_job.batch_size,
            lr=lr,
            seed=seed,
            backend=backend,
            threads=threads,
            compile=compile,
            val_fraction=val_fraction,
            resume=resume,
            record_history=record_history,
            objective=objective,
            job=str(job) if isinstance(job, (str, Path)) else None,
            workers=workers,
            memory_format=memory_format,
            precision=precision,
            adapt=adapt,
        )
    )
    events: list[Any] = []

    def seen(event: Any) -> None:
        events.append(event)
        if on_event is not None:
            on_event(event)

    if rank is None and nproc is not None and nproc > 1:
        return _fit_on_ranks(config, nproc, shares, timeout, the_job)
    if rank is not None:  # this process is one rank of a group torchrun started
        from trainpilot.run.rank_run import run_rank

        session = run_rank(config, rank, job=the_job, share_policy=shares, timeout_s=timeout, on_event=seen)
    else:
        session = TrainingSession(config, job=the_job)
        if control is not None:
            control._bind(session)
        with SignalStop(session):  # Ctrl-C: checkpoint and stop; a second one raises KeyboardInterrupt
            for event in session.events():
                seen(event)
    assert session.finished is not None
    if isinstance(session.error, USER_ERRORS):
        raise JobError(str(session.error)) from session.error
    model = session.trainer.full_model if session.trainer is not None else None
    if model is not None:
        from trainpilot.job.layout import model_to_layout

        model_to_layout(model, None)  # the same values, in the strides the user's code expects (view, numpy)
    return FitResult(session.finished.result, model, tuple(events))


def _fit_on_ranks(config: Any, nproc: int, shares: str, timeout: float, the_job: Job) -> FitResult:
    """`nproc` local ranks of the run (trainpilot.run.rank_run in each); the result is rank 0's,
    and the model the run's last checkpoint holds, loaded into the job's own model."""
    from dataclasses import replace

    from trainpilot.parallel.launch_cost import learning_launch
    from trainpilot.run.config import new_run_id
    from trainpilot.run.rank_run import launch_args

    config = replace(config, run_id=config.run_id or new_run_id())  # every rank the same id (rank 0's)
    outcome = learning_launch(nproc, launch_args(config, shares, timeout), shutdown_timeout_s=timeout)
    report = outcome.leader.report or {}
    result = report.get("result")
    if not isinstance(result, dict):
        status = "interrupted" if report.get("status") == "interrupted" else "failed"
        message = str(report.get("message") or outcome.failure_message())
        return FitResult({"status": status, "message": message, "run_id": config.run_id, "plan": None})
    return FitResult(result, _checkpointed_model(the_job, str(result["run_id"])), ())


def _checkpointed_model(the_job: Job, run_id: str) -> Any:
    """The job's model with the weights of the run's last checkpoint (None when there is none)."""
    import torch

    from trainpilot.paths import runs_dir

    path = runs_dir() / run_id / "latest.pt"
    if not path.exists():
        return None
    model = the_job.model if isinstance(the_job.model, torch.nn.Module) else the_job.model()
    state = torch.load(path, map_location="cpu", weights_only=True)["model_state"]
    model.load_state_dict(state)
    return model


__all__ = ["Control", "FitResult", "Job", "JobError", "PlanReport", "TrainPilotError", "fit", "plan"]
