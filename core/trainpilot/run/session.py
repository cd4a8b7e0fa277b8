"""A training session as a stream of typed events.

`TrainingSession.events()` runs the whole session in the calling thread (the TUI runs it in a
thread worker; headless mode iterates it directly) and yields events: observe, think, decide,
train (step and epoch events), finish. Other threads steer it through `override_backend`,
`pause`, `resume` and `request_stop` (steering.py); each request is applied at the next step
boundary, so the model and optimizer are never touched mid-step.

The session only sequences the run. What varies it is composed: the strategy (strategy.py: one
process, or one rank of a distributed run), the plan choice (plan_choice.py), the forecast of its
times (forecast.py), its history row (learning.py) and its result (result.py).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

from trainpilot import events as ev
from trainpilot.backends import BACKEND_NAMES
from trainpilot.errors import CheckpointError, TrainPilotError
from trainpilot.plans import Availability, Plan
from trainpilot.run import resume
from trainpilot.run.checkpointing import RunCheckpoints
from trainpilot.run.closed_loop import ClosedLoop
from trainpilot.run.config import DEFAULT_EPOCHS, SessionConfig, new_run_id, with_default_epochs
from trainpilot.run.epoch_loop import EpochLoop
from trainpilot.run.forecast import RunForecast
from trainpilot.run.learning import RunRecorder
from trainpilot.run.plan_choice import override_availability, runs_natively
from trainpilot.run.plan_switch import PlanSwitch
from trainpilot.run.result import run_result
from trainpilot.run.state import Runtime, Totals
from trainpilot.run.steering import Steering
from trainpilot.run.strategy import RunStrategy

__all__ = ["DEFAULT_EPOCHS", "SessionConfig", "TrainingSession", "run_session"]

STEP_EVENT_INTERVAL_S = 0.05  # at most ~20 StepProgressed events a second: enough for a smooth bar


class TrainingSession:
    def __init__(
        self,
        config: SessionConfig,
        orchestrator: Any = None,
        dataset: Any = None,
        strategy: RunStrategy | None = None,
        job: Any = None,
    ):
        self.strategy = strategy or RunStrategy()
        self.config = self.strategy.configure(with_default_epochs(config))
        self.run_id = self.strategy.agree_run_id(self.config.run_id or new_run_id())
        self._orchestrator = orchestrator
        self._dataset = dataset  # a preloaded data.Dataset (the seed API passes arrays)
        self._job = job  # the user's own trainpilot.Job (else config.job names one, or the zoo's)
        self.prepared: Any = None  # the job as prepared for this run (job/prepare.py)
        self.prepare_s = 0.0  # building, splitting and probing the job before its first step
        self.steering = Steering()
        self.forecast = RunForecast()
        self.forecast.predicts = self.strategy.predicts
        self.recorder = RunRecorder()
        self.switcher = PlanSwitch(self)
        self.checkpoints = RunCheckpoints(self)
        self.adapt = ClosedLoop(self)  # the agent keeps deciding while the run trains
        self.plan: Plan | None = None
        self.profile: Any = None
        self.rt = Runtime()
        self.finished: ev.RunFinished | None = None
        self.error: BaseException | None = None  # what ended a failed run, for a caller that raises it
        self.trainer: Any = None
        self.position: tuple[int, int, Totals] = (0, 0, Totals())
        self.energy_meter: Any = None  # energy.EnergyMeter, started when training starts
        self._ui_steady: float | None = None  # the caller's UI's steady load (expect_ui_load)
        self.progress_interval_s = STEP_EVENT_INTERVAL_S  # least time between StepProgressed events
        self._backends = self._backend_resolver()

    def expect_ui_load(self, cores: float) -> None:
        """The steady load of the caller's UI (cores), measured by the caller once its start-up was
        over. The agent then plans for that, not for what the UI's threads happened to use in the
        0.3 s it observes (the app drawing the run's first events: a transient the run never meets)."""
        self._ui_steady = max(float(cores), 0.0)

    def show_progress_every(self, seconds: float) -> None:
        """Send step progress at most once in `seconds` (an epoch's first and last steps always go).
        A caller that paints less often than the default 20 times a second says so: every event it
        would drop costs it a message to receive and handle, taken from the training it shows."""
        self.progress_interval_s = max(float(seconds), 0.0)

    def _backend_resolver(self) -> Any:
        from trainpilot.parallel.plan_backends import session_backends
        from trainpilot.paths import runs_dir

        if self.config.freeze is None:
            return session_backends()
        return session_backends(self.config.freeze, runs_dir() / self.run_id / "ane")

    @property
    def predictions(self) -> dict[Plan, Any]:
        return self.forecast.predictions

    @property
    def logical_cpus(self) -> int:
        return self._orchestrator.hardware.logical_cpus

    def backend_of(self, plan_or_name: Plan | str) -> Any:
        return self._backends(plan_or_name if isinstance(plan_or_name, str) else plan_or_name.backend)

    def trains_whole_epochs(self) -> bool:
        return self.plan is not None and self.backend_of(self.plan).trains_whole_epochs(self.plan)

    # ---------------------------------------------------------------- steering (any thread)

    def override_backend(
        self,
        backend: str,
        threads: int | None = None,
        mode: str | None = None,
        memory_format: str | None = None,
        precision: str | None = None,
    ) -> Availability:
        """Ask to move the run to another backend (a CPU plan: `threads`, `mode="compiled"`; any
        plan: `memory_format` "contiguous" | "channels_last", `precision` "fp32" | "bf16" | "fp16",
        None: the one predicted fastest) at the next step boundary. Refused at once (and as an
        `OverrideRefused` event) when it cannot run here."""
        if backend not in BACKEND_NAMES:
            return Availability(False, f"unknown backend '{backend}'")
        if memory_format not in (None, "contiguous", "channels_last"):
            return Availability(False, f"unknown memory format '{memory_format}' (contiguous or channels_last)")
        if precision not in (None, "fp32", "bf16", "fp16"):
            return Availability(False, f"unknown precision '{precision}' (fp32, bf16 or fp16)")
        avail = override_availability(backend, self._backends(backend), self.profile, threads, mode)
        if avail and precision not in (None, "fp32") and (backend != "split" or mode):
            # a split named by its workers is checked now; otherwise once the plan is resolved
            avail = runs_natively(Plan(backend, threads=threads, mode=mode).with_settings(precision=precision))
        self.steering.override((backend, threads, mode, avail, memory_format, precision))
        return avail

    def release(self) -> None:
        """Hand an overridden (pinned) run back to the agent: it decides again, under the load now
        seen, and moves the run when that pays (run/closed_loop.py)."""
        self.steering.release()

    def pause(self) -> None:
        self.steering.pause()

    def resume(self) -> None:
        self.steering.resume()

    def request_stop(self, reason: str = "user") -> None:
        """Finish the current step, checkpoint, and end the run as interrupted."""
        self.steering.request_stop(reason)
        self.strategy.on_stop_requested()

    @property
    def paused(self) -> bool:
        return self.steering.paused

    # ---------------------------------------------------------------- the stream

    def events(self) -> Iterator[ev.Event]:
        try:
            yield from self._run()
        except TrainPilotError as exc:
            self.error = exc
            yield self.finish("failed", str(exc))
        except Exception as exc:  # a bug or a device fault we could not recover from
            self.error = exc
            yield self.finish("failed", f"{type(exc).__name__}: {exc}")

    def _run(self) -> Iterator[ev.Event]:
        from trainpilot.agent.orchestrator import Agent, observe_hardware
        from trainpilot.energy.run_energy import open_run_meter
        from trainpilot.job.prepare import prepare, prepare_job
        from trainpilot.machine.allocator import keep_freed_memory
        from trainpilot.machine.contention import observe_load
        from trainpilot.paths import runs_dir
        from trainpilot.run.memory_check import check_memory

        allocator = keep_freed_memory()  # before anything is timed: calibration, planning and training alike
        resume_state = self._resumed_config() if self.config.resume else None
        cfg = self.config
        assert cfg.epochs is not None  # with_default_epochs, or the resumed run's own count (resumed_config)
        own = self._job
        if own is None and cfg.job:
            from trainpilot.job.job_file import load_job

            own = self._job = load_job(cfg.job)
        if own is not None and cfg.workers is not None:  # pinned by the caller (--workers)
            from dataclasses import replace

            own = replace(own, workers=cfg.workers)
        from trainpilot.agent.step_settings import cpu_precisions

        precisions = cpu_precisions(cfg.precision)  # the job's step is probed in these beside fp32
        started = time.perf_counter()
        if own is not None:
            from trainpilot.machine.contention import ExternalCpuMeter

            job = prepare(
                own,
                epochs=cfg.epochs,
                val_fraction=cfg.val_fraction,
                seed=cfg.seed,
                meter=ExternalCpuMeter,
                precisions=precisions,
                memory_format=cfg.memory_format,
            )
        else:
            job = prepare_job(
                cfg.model,
                self._dataset if self._dataset is not None else cfg.dataset,
                epochs=cfg.epochs,
                batch_size=cfg.batch_size,
                val_fraction=cfg.val_fraction,
                seed=cfg.seed,
                precisions=precisions,
                memory_format=cfg.memory_format,
            )
        self.prepared = job
        self.prepare_s = time.perf_counter() - started  # what a rank's launch pays per job (launch_cost.py)
        self.checkpoints.fingerprint = job.fingerprint()
        if resume_state and resume_state.get("dataset_fingerprint") not in (None, self.checkpoints.fingerprint):
            raise CheckpointError(
                f"was written for a dataset of {resume.shape_text(resume_state['dataset_fingerprint'])},"
                f" but {job.source} now holds {resume.shape_text(self.checkpoints.fingerprint)}",
                resume_state.get("loaded_from"),
            )
        self.profile = self.forecast.profile = profile = job.profile
        model = job.fresh_model()
        start_epoch = int(resume_state["epoch"]) if resume_state else 0
        start_step = int(resume_state["step"]) if resume_state else 0
        yield ev.SessionStarted(
            self.run_id,
            job.name,
            job.source,
            cfg.epochs,
            job.batch_size,
            len(job.train_set),
            len(job.val_set),
            resumed_from_epoch=start_epoch,
            metric=job.objective.metric_name,
        )
        if resume_state and resume_state.get("recovered_from"):
            yield ev.AgentStepped(
                self.run_id,
                "observe",
                f"latest checkpoint unusable ({resume_state['recovered_from']});"
                f" resuming from the previous one, epoch {start_epoch}",
                None,
                {},
            )

        # OBSERVE
        agent = self._orchestrator or Agent(backends=self._backends, objective=cfg.objective)
        if cfg.objective != "time":
            agent.objective = cfg.objective
        agent.memory_format, agent.precision = cfg.memory_format, cfg.precision
        self._orchestrator, self.forecast.predictor = agent, agent.predictor
        load = observe_load(self._ui_steady)
        observation = observe_hardware(agent.hardware, load)
        step = agent.observe(observation, profile)
        yield ev.HardwareObserved(self.run_id, profile.to_dict(), observation, step.text)
        yield self._emit_step(step)
        # every run says it: the setting is the process's
        yield ev.AgentStepped(self.run_id, "act", allocator.text, None, {})
        yield from self.strategy.first_sight(self.run_id, agent.predictor)

        # THINK
        trace_start = len(agent.trace)
        planning = agent.plan(profile, load, observation)
        for s in agent.trace[trace_start:]:
            yield self._emit_step(s)
        self.forecast.predictions.update({p.plan: p for p in planning.predictions})
        decision = planning.decision
        self.rt.confidence, self.rt.policy = decision.confidence, decision.policy
        choice = self.strategy.choose_plan(decision, cfg, agent, profile, self._backends)
        self.rt.fallback_reason = choice.fallback_reason or self.rt.fallback_reason
        source, reason = choice.source, choice.reason
        if resume_state and source == "agent":
            source, reason = "resume", f"resumed run {self.run_id} from epoch {start_epoch}, step {start_step}"

        # ACT
        check_memory(choice.plan, profile, job.dataset, self._backends(choice.plan.backend))
        self.trainer = self.strategy.make_trainer(
            model, job.train_set, job.val_set, cfg, self._backends, self.steering, prepared=job
        )
        totals = Totals()
        if resume_state:
            resume.restore_checkpoint(self.trainer, resume_state, job.name)
            self.rt.epoch_records = list(resume_state.get("epoch_records", []))[:start_epoch]
            totals = Totals.from_dict(resume_state.get("epoch_totals")) if start_step else Totals()
        self.position = (start_epoch, start_step, totals)
        self.recorder.start_meter()  # the load the run meets, for learning (see finish)
        self.energy_meter = open_run_meter(choice.plan)
        # created by the first checkpoint: a run that fails to start leaves nothing
        self.checkpoints.run_path = runs_dir() / self.run_id
        yield from self.switcher.switch(
            choice.plan, source, reason, self.rt.confidence if source == "agent" else None, load
        )
        yield from self.adapt.begin(load, source)
        per_epoch = self.forecast.epoch_s(self.plan, load)  # type: ignore[arg-type]
        self.rt.predicted_total_s = per_epoch * cfg.epochs if per_epoch else None
        if cfg.record_history and self.strategy.writes_checkpoints:
            self.recorder.start(
                agent.predictor,
                agent.hardware.machine_id,
                run_id=self.run_id,
                profile=profile,
                plan=self.plan,
                load=load,
                predicted_s=self.rt.predicted_total_s,
                epochs_done=start_epoch,
            )
        yield from EpochLoop(self, load).run(start_epoch, start_step, totals)

    def _resumed_config(self) -> dict[str, Any]:
        """The checkpoint to resume, with the run's own settings taken into the config."""
        self.config, state = resume.resumed_config(self.config, self.strategy.load_resume_state)
        self.run_id = state.get("run_id", self.run_id)
        self._backends = self._backend_resolver()
        return state

    def _emit_step(self, step: Any) -> ev.AgentStepped:
        return ev.AgentStepped(self.run_id, step.phase, step.text, step.confidence, dict(step.data))

    def result(self, status: str, message: str) -> dict[str, Any]:
        """The run as the documented --json schema (docs/json.md)."""
        out = run_result(
            run_id=self.run_id,
            status=status,
            message=message,
            config=self.config,
            plan=self.plan,
            profile=self.profile,
            rt=self.rt,
            bounds=self.forecast.bounds,
        )
        if self.prepared is not None:
            out["dataset"] = self.config.dataset or self.prepared.source
            out["metric"] = self.prepared.objective.metric_name
            out["loss_fn"] = self.prepared.objective.loss_name
            out["prepare_s"] = self.prepare_s
            if self.config.job:
                out["job"] = self.config.job
        return {**out, **self.strategy.result_extra(self.trainer)}

    def finish(self, status: str, message: str) -> ev.RunFinished:
        self.adapt.end()
        if self.energy_meter is not None:
            self.energy_meter.close()
        self.recorder.close_progress()
        status, message = self.strategy.finish(status, message, self.trainer)
        result = self.result(status, message)
        agent = self._orchestrator
        met = self.recorder.load_met(agent.hardware.logical_cpus) if agent is not None else None
        if self.trainer is not None and hasattr(self.trainer, "close_loaders"):
            # a job's DataLoader workers end with the run: after the meter read their CPU as the run's own
            self.trainer.close_loaders()
        if met is not None:  # what the run met besides itself, its own UI included (a reader compares runs by it)
            result["load_met"] = {"busy_cores": round(met.busy_cores, 3), "ui_cores": round(met.ui_cores, 3)}
        if self.config.record_history and self.profile is not None and self.plan is not None and agent is not None:
            not_recorded = self._record(agent, status, result, met)
            if not_recorded:
                # the run's own result still comes out, and says what the history lacks and why
                result["not_recorded"] = not_recorded
        self.finished = ev.RunFinished(self.run_id, status, message, result)
        return self.finished

    def _record(self, agent: Any, status: str, result: dict[str, Any], met: Any) -> list[str]:
        """The run's history row and what the cost model learns from it; returns what could not be
        recorded, and why (a run must not fail for its bookkeeping, nor lose it in silence)."""
        notes: list[str] = []
        try:
            self.recorder.finish(
                agent,
                run_id=self.run_id,
                profile=self.profile,
                plan=self.plan,
                status=status,
                result=result,
                epoch_records=self.rt.epoch_records,
                plan_changes=self.rt.plan_changes,
                trained=bool(self.rt.epoch_records) or (status != "success" and self.trainer is not None),
                met=met,
            )
        except Exception as exc:  # noqa: BLE001 - said in the result, below
            notes.append(f"the run's history row and learning: {type(exc).__name__}: {exc}")
        if len(self.adapt.phases) > 1 and self.trainer is not None:
            try:
                self.recorder.learn_phases(
                    agent,
                    run_id=self.run_id,
                    profile=self.profile,
                    phases=self.adapt.phases,
                    steps_per_epoch=self.trainer.steps_per_epoch,
                )
            except Exception as exc:  # noqa: BLE001 - said in the result, below
                notes.append(f"the run's load phases, for the cost model: {type(exc).__name__}: {exc}")
        if self.recorder.log is not None:
            notes.extend(self.recorder.log.notes)
        return notes


def run_session(config: SessionConfig, **kwargs: Any) -> tuple[dict[str, Any], list[ev.Event]]:
    """Run a whole session and return (result, events): the simplest way to train from Python."""
    session = TrainingSession(config, **kwargs)
    collected = list(session.events())
    assert session.finished is not None
    return session.finished.result, collected
