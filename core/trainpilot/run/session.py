"""A training session as a stream of typed events.

`TrainingSession.events()` runs the whole session in the calling thread (the TUI runs it in a
thread worker; headless mode iterates it directly) and yields events: observe, think, decide,
train (step and epoch events), finish. Other threads steer it through `override_backend`,
`pause`, `resume` and `request_stop`; each request is applied at the next step boundary, so the
model and optimizer are never touched mid-step.
"""
from __future__ import annotations

import json
import math
import queue
import secrets
import threading
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Generator, Iterator

from trainpilot import events as ev
from trainpilot.run import resume
from trainpilot.errors import CheckpointError, TrainingDiverged, TrainPilotError
from trainpilot.plans import COMPILED, Availability, Plan, PlanPrediction
from trainpilot.run.memory_check import check_memory
from trainpilot.run.resume import describe_exception
from trainpilot.units import seconds as fmt_s

STEP_EVENT_INTERVAL_S = 0.05  # at most ~20 StepProgressed events a second: enough for a smooth bar


DEFAULT_EPOCHS = 3


@dataclass(frozen=True)
class SessionConfig:
    model: str | dict[str, Any] = "small_cnn"
    dataset: str | None = None  # None or "demo": the bundled demo set
    epochs: int | None = None  # None: DEFAULT_EPOCHS, or with `resume` the resumed run's own count
    batch_size: int = 64
    lr: float = 1e-3
    seed: int = 0
    backend: str = "auto"  # auto | cpu | ane | mps | cuda
    threads: int | None = None
    compile: bool = False  # train a torch.compile'd model (a CPU plan setting, see backends/compiled.py)
    val_fraction: float = 0.1
    run_id: str | None = None
    resume: str | None = None  # run id (or checkpoint path) to resume
    record_history: bool = True
    freeze: int | None = None  # ANE frozen-backbone: how many leading layers run in Core ML
    objective: str = "time"  # what the agent minimises: time | energy | edp (energy/objective.py)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def with_default_epochs(config: SessionConfig) -> SessionConfig:
    """`config` with DEFAULT_EPOCHS when it names none (a resumed run keeps its own count instead)."""
    if config.epochs is None and not config.resume:
        return replace(config, epochs=DEFAULT_EPOCHS)
    return config


def new_run_id() -> str:
    return time.strftime("%Y%m%d-%H%M%S") + "-" + secrets.token_hex(2)


@dataclass
class _Segment:
    plan: Plan
    steps: int = 0
    seconds: float = 0.0
    predicted_s: float | None = None


@dataclass
class _Totals:
    """Running sums of the epoch in progress (checkpointed, so a resumed epoch reports whole-epoch figures)."""

    loss_sum: float = 0.0
    correct: float = 0.0
    seen: float = 0.0

    def copy(self) -> "_Totals":
        return replace(self)

    def to_dict(self) -> dict[str, float]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Any) -> "_Totals":
        try:
            return cls(float(data["loss_sum"]), float(data["correct"]), float(data["seen"]))
        except (TypeError, KeyError, ValueError):
            return cls()


@dataclass
class _Snapshot:
    """The last state known to be good (CPU copies) and where it was: a device fault restarts here."""

    epoch: int
    step: int
    totals: _Totals
    state: dict[str, Any]


@dataclass
class _Runtime:
    """Mutable state of a running session, kept together so `result()` can be built at any time."""

    epoch_records: list[dict[str, Any]] = field(default_factory=list)
    plan_changes: list[dict[str, Any]] = field(default_factory=list)
    confidence: float | None = None
    policy: str = "rules"
    predicted_total_s: float | None = None
    train_seconds: float = 0.0
    fallback_reason: str | None = None
    val_accuracy: float | None = None
    checkpoint: str | None = None


class TrainingSession:
    def __init__(self, config: SessionConfig, orchestrator: Any = None, dataset: Any = None):
        config = with_default_epochs(config)
        self.config = config
        self.run_id = config.run_id or new_run_id()
        self._orchestrator = orchestrator
        self._dataset = dataset  # a preloaded data.Dataset (the seed API passes arrays)
        self._commands: "queue.Queue[tuple[str, Any]]" = queue.Queue()
        self._pause = threading.Event()
        self._stop_reason: str | None = None
        self._lock = threading.Lock()
        self.plan: Plan | None = None
        self.predictions: dict[Plan, PlanPrediction] = {}
        self.profile: Any = None
        self.rt = _Runtime()
        self.finished: ev.RunFinished | None = None
        self.trainer: Any = None
        self._snapshot: _Snapshot | None = None
        self._position: tuple[int, int, _Totals] = (0, 0, _Totals())
        self._run_path: Path | None = None
        self._fingerprint: dict[str, Any] | None = None
        self._meter: Any = None  # predict.contention.ExternalCpuMeter, started when training starts
        self._log: Any = None  # runlog.RunLog: this run's row in the history, from its start
        self._energy: Any = None  # energy.EnergyMeter, started when training starts
        self._epoch_mark: Any = None  # the energy meter's reading when the epoch in progress began
        self._ui_steady: float | None = None  # the caller's UI's steady load (expect_ui_load)
        self.progress_interval_s = STEP_EVENT_INTERVAL_S  # least time between StepProgressed events (show_progress_every)
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

    # ---------------------------------------------------------------- steering (any thread)

    def override_backend(self, backend: str, threads: int | None = None, mode: str | None = None) -> Availability:
        """Ask to move the run to another backend (a CPU plan: `threads`, `mode="compiled"`) at the
        next step boundary. Refused at once (and as an `OverrideRefused` event) when it cannot run here."""
        from trainpilot.backends import BACKEND_NAMES

        if backend not in BACKEND_NAMES:
            return Availability(False, f"unknown backend '{backend}'")
        avail = self._backends(backend).availability()
        if avail and self.profile is not None:
            avail = self._backends(backend).supports(self.profile)
        if avail and mode and self.profile is not None:
            avail = self._backends(backend).supports_plan(self.profile, Plan(backend, threads=threads, mode=mode))
        self._commands.put(("override", (backend, threads, mode, avail)))
        return avail

    def pause(self) -> None:
        self._commands.put(("pause", None))

    def resume(self) -> None:
        self._commands.put(("resume", None))

    def request_stop(self, reason: str = "user") -> None:
        """Finish the current step, checkpoint, and end the run as interrupted."""
        with self._lock:
            self._stop_reason = self._stop_reason or reason
        self._pause.clear()
        self._commands.put(("wake", None))

    @property
    def paused(self) -> bool:
        return self._pause.is_set()

    # ---------------------------------------------------------------- the stream

    def events(self) -> Iterator[ev.Event]:
        try:
            yield from self._run()
        except TrainPilotError as exc:
            yield self._finish("failed", str(exc))
        except Exception as exc:  # a bug or a device fault we could not recover from
            yield self._finish("failed", f"{type(exc).__name__}: {exc}")

    def _calibrate_on_first_sight(self, predictor: Any) -> Iterator[ev.Event]:
        """The first run on a machine quick-calibrates the cost model, so the agent decides with
        measured figures from then on (TRAINPILOT_AUTO_CALIBRATE=0 leaves it to the rule cascade)."""
        if getattr(predictor, "is_calibrated", True) or getattr(predictor, "is_described", False):
            return
        from trainpilot.predict.auto import auto_calibration_enabled, ensure_calibrated

        if not auto_calibration_enabled():
            return
        yield ev.AgentStepped(self.run_id, "observe", "first run on this machine: a quick calibration of the cost model (`trainpilot headless calibrate` measures fully)")
        start = time.perf_counter()
        try:
            ensure_calibrated(predictor)
        except Exception as exc:  # calibration is an optimisation: a failure must not cost the run
            yield ev.AgentStepped(self.run_id, "observe", f"calibration failed ({type(exc).__name__}: {exc}); the rule cascade decides")
            return
        yield ev.AgentStepped(self.run_id, "observe", f"calibrated in {fmt_s(time.perf_counter() - start)}")

    def _emit_step(self, step: Any) -> ev.AgentStepped:
        return ev.AgentStepped(self.run_id, step.phase, step.text, step.confidence, dict(step.data))

    def _run(self) -> Iterator[ev.Event]:
        from trainpilot.agent.orchestrator import HardwareOrchestrator, observe_hardware
        from trainpilot.machine.allocator import keep_freed_memory
        from trainpilot.job.data import resolve_dataset
        from trainpilot.paths import runs_dir
        from trainpilot.run.trainer import Trainer, seed_everything
        from trainpilot.job.workload import ModelSpec, build_model, profile_model

        cfg = self.config
        allocator = keep_freed_memory()  # before anything is timed: calibration, planning and training alike
        resume_state = None
        if cfg.resume:
            if cfg.resume == resume.LAST:
                cfg = replace(cfg, resume=resume.resolve_run(cfg.resume))
                self.config = cfg
            resume_path = resume.checkpoint_path(cfg.resume)
            resume_state = self._load_resume_state(resume_path)
            saved = resume_state["config"]
            cfg = replace(cfg, model=saved["model"], dataset=saved["dataset"], batch_size=saved["batch_size"], lr=saved["lr"], seed=saved["seed"], val_fraction=saved["val_fraction"], freeze=saved.get("freeze", cfg.freeze), epochs=cfg.epochs if cfg.epochs is not None else saved["epochs"])
            self.config = cfg
            self.run_id = resume_state.get("run_id", self.run_id)
            self._backends = self._backend_resolver()
        spec = ModelSpec.from_config(cfg.model)
        dataset = self._dataset if self._dataset is not None else resolve_dataset(cfg.dataset)
        self._fingerprint = {"samples": len(dataset), "sample_shape": list(dataset.sample_shape), "num_classes": dataset.num_classes}
        if resume_state and resume_state.get("dataset_fingerprint") not in (None, self._fingerprint):
            raise CheckpointError(f"was written for a dataset of {resume.shape_text(resume_state['dataset_fingerprint'])}, but {dataset.source} now holds {resume.shape_text(self._fingerprint)}", resume_state.get("loaded_from", resume_path))
        train_set, val_set = dataset.split(cfg.val_fraction, cfg.seed)
        seed_everything(cfg.seed)
        model = build_model(spec, dataset.sample_shape, dataset.num_classes)
        profile = profile_model(model, dataset.sample_shape, dataset.num_classes, len(train_set), name=spec.name, batch_size=cfg.batch_size, epochs=cfg.epochs)
        self.profile = profile
        seed_everything(cfg.seed)  # profiling consumed random numbers; restart the stream for the run
        model = build_model(spec, dataset.sample_shape, dataset.num_classes)
        start_epoch = int(resume_state["epoch"]) if resume_state else 0
        start_step = int(resume_state["step"]) if resume_state else 0
        yield ev.SessionStarted(self.run_id, spec.name, dataset.source, cfg.epochs, cfg.batch_size, len(train_set), len(val_set), resumed_from_epoch=start_epoch)
        if resume_state and resume_state.get("recovered_from"):
            yield ev.AgentStepped(self.run_id, "observe", f"latest checkpoint unusable ({resume_state['recovered_from']}); resuming from the previous one, epoch {start_epoch}", None, {})

        # OBSERVE
        agent = self._orchestrator or HardwareOrchestrator(backends=self._backends, objective=cfg.objective)
        if cfg.objective != "time":
            agent.objective = cfg.objective
        self._orchestrator = agent
        load = _observe_load(self._ui_steady)
        observation = observe_hardware(agent.hardware, load)
        step = agent.observe(observation, profile)
        yield ev.HardwareObserved(self.run_id, profile.to_dict(), observation, step.text)
        yield self._emit_step(step)
        yield ev.AgentStepped(self.run_id, "act", allocator.text, None, {})  # every run says it: the setting is the process's
        yield from self._calibrate_on_first_sight(agent.predictor)

        # THINK
        trace_start = len(agent.trace)
        planning = agent.plan(profile, load, observation)
        for s in agent.trace[trace_start:]:
            yield self._emit_step(s)
        self.predictions = {p.plan: p for p in planning.predictions}
        decision = planning.decision
        self.rt.confidence, self.rt.policy = decision.confidence, decision.policy
        plan, source, reason = self._act_plan(decision, cfg, agent, profile, load)
        if resume_state and source == "agent":
            source, reason = "resume", f"resumed run {self.run_id} from epoch {start_epoch}, step {start_step}"

        # ACT
        check_memory(plan, profile, dataset, self._backends(plan.backend))
        self.trainer = self._make_trainer(Trainer, model, train_set, val_set)
        trainer = self.trainer
        totals = _Totals()
        if resume_state:
            resume.restore_checkpoint(trainer, resume_state, spec.name)
            self.rt.epoch_records = list(resume_state.get("epoch_records", []))[:start_epoch]
            totals = _Totals.from_dict(resume_state.get("epoch_totals")) if start_step else _Totals()
        self._position = (start_epoch, start_step, totals)
        from trainpilot.machine.contention import ExternalCpuMeter

        self._meter = ExternalCpuMeter().__enter__()  # the load the run meets, for learning (see _finish)
        self._energy = _open_energy_meter(plan)
        self._run_path = runs_dir() / self.run_id  # created by the first checkpoint: a run that fails to start leaves nothing
        yield from self._switch(plan, source, reason, self.rt.confidence if source == "agent" else None, load)
        per_epoch = self._predicted_epoch_s(self.plan, load)  # type: ignore[arg-type]
        self.rt.predicted_total_s = per_epoch * cfg.epochs if per_epoch else None
        self._start_log(agent, load, start_epoch)

        epoch, first_step = start_epoch, start_step
        segments = [_Segment(self.plan)]  # type: ignore[arg-type]
        while epoch < cfg.epochs:
            self._epoch_mark = self._energy.mark() if self._energy is not None else None
            try:
                stopped = None
                if self.plan is not None and self.plan.mode == "core-ml-update":
                    stopped = yield from self._core_ml_update_epoch(epoch, segments, load)
                if stopped is None:
                    stopped = yield from self._train_epoch(epoch, first_step, totals, segments, load)
            except Exception as exc:
                if not self._can_fall_back():
                    raise
                # A device fault (an exception from the device, out of memory, a failed conversion,
                # NaNs only the device produced): back to the last good state, on the CPU.
                yield from self._fall_back(f"{self.plan.label} failed: {describe_exception(exc)}", load)
                epoch, first_step, totals = self._position
                segments.append(_Segment(self.plan))
                continue
            if stopped:
                return
            epoch, first_step, totals = epoch + 1, 0, _Totals()
            segments = [_Segment(self.plan)]  # type: ignore[arg-type]
        yield self._finish("success", self._success_message())

    def _start_log(self, agent: Any, load: Any, start_epoch: int) -> None:
        """The run is in the history from now on ("running"), so a kill -9 leaves it findable."""
        from trainpilot.predict.history import run_record
        from trainpilot.run.runlog import RunLog, history_of

        history = history_of(agent.predictor) if self.config.record_history else None
        if history is None or self.plan is None:
            return
        self._log = RunLog(history)
        self._log.start(run_record(run_id=self.run_id, machine_id=agent.hardware.machine_id, profile=self.profile, plan=self.plan, load=load,
                                   predicted_s=self.rt.predicted_total_s, actual_s=0.0, status="running", epochs_done=start_epoch))

    def _train_epoch(self, epoch: int, first_step: int, totals: "_Totals", segments: list[_Segment], load: Any) -> Generator[ev.Event, None, bool]:
        """Steps `first_step`.. of `epoch`, then validation and the epoch checkpoint. Returns True
        when the run was stopped (checkpointed and finished as interrupted)."""
        trainer = self.trainer
        assert trainer is not None
        steps_per_epoch = trainer.steps_per_epoch
        epoch_start = time.perf_counter()
        last_emit = float("-inf")  # an epoch's first step always goes: a reader sees each epoch begin
        for step_index in range(first_step, steps_per_epoch):
            # Step boundary: apply what other threads asked for.
            self._position = (epoch, step_index, totals)
            yield from self._apply_commands(load, segments)
            if self._stop_requested():
                yield from self._checkpoint(epoch, step_index, "interrupt", totals)
                yield self._finish("interrupted", f"stopped ({self._stop_reason}) at epoch {epoch + 1}, step {step_index}; resume with --resume {self.run_id}")
                return True
            result = trainer.train_step(epoch, step_index)
            if not math.isfinite(result.loss):
                raise TrainingDiverged(f"the loss became {result.loss} at epoch {epoch + 1}, step {step_index + 1} (try a lower --lr); {self._kept()}")
            segments[-1].steps += 1
            segments[-1].seconds += result.seconds
            totals.loss_sum += result.loss * result.seen
            totals.correct += result.correct
            totals.seen += result.seen
            now = time.perf_counter()
            if now - last_emit >= self.progress_interval_s or result.step == steps_per_epoch:
                last_emit = now
                eta = self._eta(epoch, result.step, steps_per_epoch, load)
                low, high = self._bounds(self.plan, eta)
                yield ev.StepProgressed(self.run_id, epoch + 1, result.step, steps_per_epoch, result.loss, now - epoch_start, eta, low, high)
        trainer.synchronize()
        yield from self._close_epoch(epoch, segments, totals.loss_sum / max(totals.seen, 1), totals.correct / max(totals.seen, 1), load)
        return False

    def _core_ml_update_epoch(self, epoch: int, segments: list[_Segment], load: Any) -> Generator[ev.Event, None, bool | None]:
        """One epoch of the ANE backend's core-ml-update mode: Core ML's MLUpdateTask trains the
        whole epoch in one call (macOS), so this mode has no step events and requests from other
        threads apply at epoch boundaries. Returns None when an override moved the run off this
        mode before the epoch began (the caller then runs a normal epoch)."""
        trainer = self.trainer
        assert trainer is not None and self.plan is not None
        self._position = (epoch, 0, _Totals())
        yield from self._apply_commands(load, segments)
        if self._stop_reason:
            yield from self._checkpoint(epoch, 0, "interrupt", _Totals())
            yield self._finish("interrupted", f"stopped ({self._stop_reason}) at epoch {epoch + 1}; resume with --resume {self.run_id}")
            return True
        if self.plan.mode != "core-ml-update":
            return None
        backend = self._backends(self.plan.backend)
        start = time.perf_counter()
        report = backend.train_core_ml_update(
            trainer.full_model, trainer.train_set.X, trainer.train_set.y, trainer.train_set.num_classes,
            epochs=1, batch_size=self.config.batch_size, learning_rate=self.config.lr, optimizer="adam",
        )
        segments[-1].steps += trainer.steps_per_epoch
        segments[-1].seconds += time.perf_counter() - start
        # Core ML reports the loss, not the accuracy: measure it on the training set with the updated weights.
        accuracy = trainer.accuracy_on(trainer.train_set)
        yield from self._close_epoch(epoch, segments, float(report.epoch_losses[-1]), accuracy, load)
        return False

    def _close_epoch(self, epoch: int, segments: list[_Segment], loss: float, accuracy: float | None, load: Any) -> Iterator[ev.Event]:
        """Validation, the epoch record, its checkpoint, and the EpochTimed event."""
        trainer = self.trainer
        assert trainer is not None
        actual = sum(s.seconds for s in segments)
        # The epoch's training steps, as its time is (validation is outside both).
        energy = self._energy.since(self._epoch_mark) if self._energy is not None and self._epoch_mark is not None else None
        val_acc = trainer.evaluate()
        self.rt.val_accuracy = val_acc
        predicted = self._segments_predicted(segments, trainer.steps_per_epoch, load)
        record = {
            "epoch": epoch + 1,
            "loss": loss,
            "accuracy": accuracy,
            "val_accuracy": val_acc,
            "predicted_s": predicted,
            "actual_s": actual,
            "plan": self.plan.to_dict(),  # type: ignore[union-attr]
            "segments": [{"plan": s.plan.to_dict(), "steps": s.steps, "actual_s": s.seconds, "predicted_s": s.predicted_s} for s in segments if s.steps],
            "energy_j": energy.joules if energy is not None else None,
            "energy_source": energy.source if energy is not None else None,
        }
        record["predicted_low_s"], record["predicted_high_s"] = self._segments_bounds(segments, predicted)
        yield from self._checkpoint(epoch + 1, 0, "epoch", _Totals(), record)
        self.rt.train_seconds += actual
        yield ev.EpochTimed(self.run_id, epoch + 1, record["loss"], record["accuracy"], val_acc, predicted, actual, self.plan, tuple(record["segments"]),  # type: ignore[arg-type]
                            energy_j=record["energy_j"], energy_source=record["energy_source"],
                            predicted_low_s=record["predicted_low_s"], predicted_high_s=record["predicted_high_s"])

    def _fall_back(self, reason: str, load: Any) -> Iterator[ev.Event]:
        """Continue on the CPU from the last good state and say why. The live tensors are not
        trusted (a step may have died half way through the optimizer update), so the snapshot taken
        when the device plan began, or at the last epoch end, is restored; the steps since are redone."""
        snap = self._snapshot
        assert snap is not None and self.trainer is not None
        self.rt.fallback_reason = reason
        self.trainer.restore_on_cpu(snap.state)
        del self.rt.epoch_records[snap.epoch :]
        self._position = (snap.epoch, snap.step, snap.totals.copy())
        where = f"epoch {snap.epoch + 1}, step {snap.step}"
        yield ev.AgentStepped(self.run_id, "act", f"{reason}; restoring the last good state ({where}) and continuing on the CPU", None, {"fallback": reason})
        yield from self._switch(self._fallback_plan(), "fallback", f"{reason}; continuing on the CPU from {where}", None, load)

    def _kept(self) -> str:
        if self.rt.checkpoint:
            return f"the last good checkpoint ({self.rt.checkpoint}) is kept"
        return "nothing was saved"

    def _fallback_plan(self) -> Plan:
        """Eager CPU, whatever failed (a device, or compiling)."""
        if self.config.threads:
            return Plan("cpu", threads=self.config.threads)
        return self._plan_for("cpu", None)

    # ---------------------------------------------------------------- helpers
    # (the small methods below are where a distributed rank differs: run/distributed_session.py)

    def _load_resume_state(self, path: Path) -> dict[str, Any]:
        from trainpilot.run.checkpoint import load_checkpoint

        return load_checkpoint(path)

    def _act_plan(self, decision: Any, cfg: SessionConfig, agent: Any, profile: Any, load: Any) -> tuple[Plan, str, str]:
        if cfg.backend != "auto" or cfg.threads or cfg.compile:
            return self._forced_plan(cfg, agent, profile, load)
        return decision.plan, "agent", "; ".join(decision.reasoning) or "agent decision"

    def _make_trainer(self, trainer_cls: Any, model: Any, train_set: Any, val_set: Any) -> Any:
        cfg = self.config
        return trainer_cls(model, train_set, val_set, batch_size=cfg.batch_size, lr=cfg.lr, seed=cfg.seed, backends=self._backends)

    def _can_fall_back(self) -> bool:
        """Whether a failed step may continue on the CPU from the last good state (device plans)."""
        return self.plan is not None and not self.plan.is_eager_cpu and self._snapshot is not None

    def _stop_requested(self) -> bool:
        return bool(self._stop_reason)

    def _forced_plan(self, cfg: SessionConfig, agent: Any, profile: Any, load: Any) -> tuple[Plan, str, str]:
        name = "cpu" if cfg.backend == "auto" else cfg.backend
        backend = self._backends(name)
        avail = backend.availability()
        if avail:
            avail = backend.supports(profile)
        if not avail:
            self.rt.fallback_reason = f"{name} unavailable: {avail.reason}"
            threads = cfg.threads or agent.hardware.logical_cpus
            return Plan("cpu", threads=threads), "fallback", f"{name} requested but unavailable ({avail.reason}); running on the CPU"
        plans = backend.plans(agent.hardware.logical_cpus)
        if name == "cpu":
            threads = cfg.threads or (agent.last_plan.threads if agent.last_plan and agent.last_plan.backend == "cpu" else None) or agent.hardware.logical_cpus
            plan = Plan("cpu", threads=threads, mode=COMPILED if cfg.compile else None)
            if cfg.compile:
                compiles = backend.supports_plan(profile, plan)
                if not compiles:
                    self.rt.fallback_reason = f"torch.compile unavailable: {compiles.reason}"
                    return Plan("cpu", threads=threads), "fallback", f"--compile requested but torch.compile cannot run here ({compiles.reason}); training eagerly"
            return plan, "user", f"requested --backend cpu with {threads} thread(s)" + (", compiled" if cfg.compile else "")
        return plans[0], "user", f"requested --backend {name}"

    def _predicted_epoch_s(self, plan: Plan, load: Any) -> float | None:
        prediction = self.predictions.get(plan)
        if prediction is None and self._orchestrator is not None and self.profile is not None:
            try:
                prediction = self._orchestrator.predictor.predict(self.profile, plan, load)
            except Exception:
                prediction = None
            if prediction is not None:
                self.predictions[plan] = prediction
        if prediction is None or prediction.predicted_s is None:
            return None
        per_epoch = prediction.detail.get("per_epoch_s")
        return float(per_epoch) if per_epoch is not None else prediction.predicted_s / max(self.profile.epochs, 1)

    def _bounds(self, plan: Plan | None, value_s: float | None) -> tuple[float | None, float | None]:
        """The 80 % interval of a time derived from `plan`'s prediction (an epoch, the rest, an ETA):
        the prediction's own interval, relative (predict/interval.py)."""
        from trainpilot.predict.interval import scaled

        prediction = self.predictions.get(plan) if plan is not None else None
        if prediction is None:
            return None, None
        return scaled(prediction.detail.get("interval"), prediction.predicted_s, value_s)

    def _segments_bounds(self, segments: list[_Segment], predicted: float | None) -> tuple[float | None, float | None]:
        if predicted is None:
            return None, None
        lows = highs = 0.0
        for seg in segments:
            if not seg.steps:
                continue
            low, high = self._bounds(seg.plan, seg.predicted_s)
            if low is None or high is None:
                return None, None
            lows, highs = lows + low, highs + high
        return lows, highs

    def _segments_predicted(self, segments: list[_Segment], steps_per_epoch: int, load: Any) -> float | None:
        total = 0.0
        for seg in segments:
            per_epoch = self._predicted_epoch_s(seg.plan, load)
            if per_epoch is None:
                return None
            seg.predicted_s = per_epoch * seg.steps / steps_per_epoch
            total += seg.predicted_s
        return total

    def _eta(self, epoch: int, step: int, steps_per_epoch: int, load: Any) -> float | None:
        """Remaining time from the prediction, corrected by how fast this run has actually gone."""
        assert self.plan is not None
        per_epoch = self._predicted_epoch_s(self.plan, load)
        if per_epoch is None:
            return None
        done = sum(r["actual_s"] for r in self.rt.epoch_records)
        predicted_done = sum(r["predicted_s"] or 0 for r in self.rt.epoch_records)
        ratio = done / predicted_done if predicted_done > 0 else 1.0
        remaining_steps = (self.config.epochs - epoch - 1) * steps_per_epoch + (steps_per_epoch - step)
        return per_epoch * remaining_steps / steps_per_epoch * ratio

    def _switch(self, plan: Plan, source: str, reason: str, confidence: float | None, load: Any) -> Iterator[ev.Event]:
        assert self.trainer is not None
        switch_cost = None
        if self.plan is not None and self.profile is not None:
            switch_cost = _switch_cost_s(self.profile, self.plan, plan)
        if not plan.is_eager_cpu:
            # The last good state to come back to if the device (or compiling) fails (eager CPU
            # needs none: its failure is a bug or bad input, not something another plan can fix).
            epoch, step, totals = self._position
            self._snapshot = _Snapshot(epoch, step, totals.copy(), self.trainer.snapshot())
        try:
            self.trainer.use_plan(plan)
        except Exception as exc:
            if plan.is_eager_cpu:
                raise
            yield from self._fall_back(f"moving to {plan.label} failed: {describe_exception(exc)}", load)
            return
        self.plan = plan
        if self._energy is not None:
            self._energy.cover(plan)  # a run moved to a device: count the device's energy too
        per_epoch = self._predicted_epoch_s(plan, load)
        remaining = per_epoch * max(self.config.epochs - len(self.rt.epoch_records), 0) if per_epoch else None
        self.rt.plan_changes.append({"plan": plan.to_dict(), "source": source, "reason": reason, "at_epoch": len(self.rt.epoch_records) + 1})
        low, high = self._bounds(plan, remaining)
        yield ev.BackendChosen(self.run_id, plan, confidence, source, reason, remaining, switch_cost, low, high)

    def _apply_commands(self, load: Any, segments: list[_Segment]) -> Iterator[ev.Event]:
        while True:
            try:
                kind, arg = self._commands.get_nowait()
            except queue.Empty:
                if self._pause.is_set() and not self._stop_reason:
                    kind, arg = self._commands.get()  # block while paused; any command wakes us
                else:
                    return
            if kind == "pause" and not self._pause.is_set():
                self._pause.set()
                yield ev.SessionPaused(self.run_id, len(self.rt.epoch_records) + 1, self._position[1])  # steps done this epoch
            elif kind == "resume" and self._pause.is_set():
                self._pause.clear()
                yield ev.SessionResumed(self.run_id, len(self.rt.epoch_records) + 1, self._position[1])
            elif kind == "override":
                backend, threads, mode, avail = arg
                if not avail:
                    yield ev.OverrideRefused(self.run_id, backend, avail.reason)
                    continue
                plan = self._plan_for(backend, threads, mode)
                if plan == self.plan:
                    continue
                yield from self._switch(plan, "user", f"user override to {plan.label}", None, load)
                segments.append(_Segment(self.plan))  # type: ignore[arg-type]

    def _plan_for(self, backend: str, threads: int | None, mode: str | None = None) -> Plan:
        """The plan of `backend` to move to. For the CPU: the thread count asked for, else the one
        the agent predicted fastest (not blindly all threads), eager unless `mode` asks to compile."""
        assert self._orchestrator is not None
        plans = self._backends(backend).plans(self._orchestrator.hardware.logical_cpus)
        if backend == "cpu":
            if threads:
                return Plan("cpu", threads=threads, mode=mode)
            timed = [p for p in self.predictions.values() if p.plan.backend == "cpu" and p.plan.mode == mode and p.predicted_s is not None]
            if timed:
                return min(timed, key=lambda p: p.predicted_s).plan  # type: ignore[arg-type, return-value]
            return max((p for p in plans if p.mode == mode), key=lambda p: p.threads or 0)
        return plans[0]

    def _checkpoint(self, epoch: int, step: int, reason: str, totals: "_Totals", record: dict[str, Any] | None = None) -> Iterator[ev.Event]:
        """Save the state at (epoch, step). At an epoch end the copy also becomes the in-memory
        last good state, and the epoch's record is appended only once its weights are known good."""
        from trainpilot.run.checkpoint import save_checkpoint

        assert self.trainer is not None and self._run_path is not None
        # On a device plan the epoch's state is also the last good state to fall back to, so it
        # gets a private copy; on the CPU (no fallback) the live tensors are saved as they are.
        keep = reason == "epoch" and self.plan is not None and not self.plan.is_eager_cpu
        state = self.trainer.snapshot() if keep else self.trainer.state_dict()
        bad = [name for name, tensor in state["model_state"].items() if tensor.is_floating_point() and not bool(tensor.isfinite().all())]
        if bad:
            raise TrainingDiverged(f"weights became NaN or infinite ({', '.join(bad[:3])}) by epoch {epoch}, step {step} (try a lower --lr); {self._kept()}")
        records = self.rt.epoch_records + ([record] if record is not None else [])
        config = self.config.to_dict()
        config["model"] = config["model"] if isinstance(config["model"], str) else dict(config["model"])
        config["dataset"] = resume.absolute_dataset(config["dataset"])
        meta = dict(
            epoch=epoch,
            step=step,
            run_id=self.run_id,
            config=config,
            plan=self.plan.to_dict() if self.plan else None,
            epoch_records=records,
            epoch_totals=totals.to_dict(),
            dataset_fingerprint=self._fingerprint,
        )
        path = save_checkpoint(self._run_path, dict(state, **meta))
        if self._log is not None:
            self._log.checkpointed(epoch)
        if record is not None:
            self.rt.epoch_records.append(record)
        if keep:
            self._snapshot = _Snapshot(epoch, step, totals.copy(), state)
        self.rt.checkpoint = str(path)
        yield ev.CheckpointSaved(self.run_id, str(path), epoch, step, reason)

    def _success_message(self) -> str:
        assert self.plan is not None
        acc = f", validation accuracy {self.rt.val_accuracy:.1%}" if self.rt.val_accuracy is not None else ""
        pred = f" (predicted {fmt_s(self.rt.predicted_total_s)})" if self.rt.predicted_total_s else ""
        energy = _run_energy(self.rt.epoch_records)
        used = f", {energy.text}" if energy.joules is not None else ""
        text = f"trained {self.config.epochs} epoch(s) on {self.plan.label} in {fmt_s(self.rt.train_seconds)}{pred}{used}{acc}"
        if self.rt.fallback_reason:
            text += f"; fell back to the CPU: {self.rt.fallback_reason}"
        return text

    def result(self, status: str, message: str) -> dict[str, Any]:
        """The run as the documented --json schema (see README, "JSON output")."""
        profile = self.profile
        epochs = self.rt.epoch_records
        last = epochs[-1] if epochs else {}
        predicted_total = None
        if epochs and all(e["predicted_s"] is not None for e in epochs):
            predicted_total = sum(e["predicted_s"] for e in epochs)
        plan = self.plan
        if epochs and all(e.get("predicted_low_s") is not None for e in epochs):
            low, high = sum(e["predicted_low_s"] for e in epochs), sum(e["predicted_high_s"] for e in epochs)
        else:
            low, high = self._bounds(plan, predicted_total if predicted_total is not None else self.rt.predicted_total_s)
        return {
            "schema": 1,
            "run_id": self.run_id,
            "status": status,
            "backend": plan.backend if plan else None,
            "plan": plan.to_dict() if plan else None,
            "confidence": self.rt.confidence,
            "policy": self.rt.policy,
            "model": profile.model if profile else None,
            "dataset": self.config.dataset or "demo",
            "params": profile.params if profile else None,
            "predicted_s": predicted_total if predicted_total is not None else self.rt.predicted_total_s,
            "predicted_low_s": low,  # the 80 % interval of predicted_s (predict/interval.py)
            "predicted_high_s": high,
            "actual_s": sum(e["actual_s"] for e in epochs) if epochs else None,
            "execution_time": sum(e["actual_s"] for e in epochs) if epochs else 0.0,
            "loss": last.get("loss"),
            "accuracy": last.get("accuracy"),
            "val_accuracy": last.get("val_accuracy"),
            "message": message,
            "fallback_reason": self.rt.fallback_reason,
            "plan_changes": self.rt.plan_changes,
            "checkpoint": self.rt.checkpoint,
            "epochs": [{**{k: e[k] for k in ("epoch", "loss", "accuracy", "val_accuracy", "predicted_s", "actual_s", "plan", "segments")},
                        "energy_j": e.get("energy_j"), "predicted_low_s": e.get("predicted_low_s"), "predicted_high_s": e.get("predicted_high_s")} for e in epochs],
            "objective": self.config.objective,
            **_run_energy(epochs).to_dict(),
        }

    def _record_end(self, status: str, result: dict[str, Any], learn: bool, met: Any = None) -> None:
        """Give the run's history row its final status; the cost model learns from it only when
        `learn` (a run that timed one plan and trained something). `met`: the load during the run
        (its own UI included), as _finish measured it."""
        agent = self._orchestrator
        row = self._log.row_id if self._log is not None else None
        if not learn and row is None:
            return
        if met is None:
            from trainpilot.machine.monitor import measure_load

            met = measure_load(0.0)
        done = dict(predicted_s=result["predicted_s"], actual_s=result["actual_s"] or 0.0, status=status, epochs_done=len(self.rt.epoch_records))
        energy = _run_energy(self.rt.epoch_records)
        if learn:
            record = agent.predictor.record
            extra = {"energy": energy} if _takes_energy(record) else {}
            if row is not None:
                extra["row_id"] = row
            record(self.profile, self.plan, met, run_id=self.run_id, **done, **extra)
        else:
            from trainpilot.predict.history import run_record

            rec = run_record(run_id=self.run_id, machine_id=agent.hardware.machine_id, profile=self.profile, plan=self.plan, load=met, **done)
            self._log.finish(replace(rec, energy_j=energy.joules, energy_source=energy.source), learn=False)

    def _finish(self, status: str, message: str) -> ev.RunFinished:
        if self._energy is not None:
            self._energy.close()
        if self._log is not None:
            self._log.close()  # the run's progress connection; the end is written on one of its own
        result = self.result(status, message)
        met = None
        if self._meter is not None and self._orchestrator is not None:
            try:
                self._meter.__exit__(None, None, None)
                met = self._meter.result.as_sample(self._orchestrator.hardware.logical_cpus)  # the load during the run
                # what the run met besides itself, its own UI included (a reader compares runs by it)
                result["load_met"] = {"busy_cores": round(met.busy_cores, 3), "ui_cores": round(met.ui_cores, 3)}
            except Exception:  # noqa: BLE001 - a meter that cannot read /proc costs the figure, not the run
                met = None
        trained = bool(self.rt.epoch_records) or (status != "success" and self.trainer is not None)
        # A run whose plan changed mid-way timed two plans at once: nothing to learn about either.
        one_plan = len({json.dumps(c["plan"], sort_keys=True) for c in self.rt.plan_changes}) <= 1
        if self.config.record_history and self.profile is not None and self.plan is not None and self._orchestrator is not None:
            try:
                self._record_end(status, result, learn=trained and one_plan, met=met)
            except Exception:
                pass  # learning is best-effort; the run's own result must still come out
        self.finished = ev.RunFinished(self.run_id, status, message, result)
        return self.finished


def _open_energy_meter(plan: Plan) -> Any:
    """The run's energy meter (energy/meter.py); a meter that cannot start costs the figure, not the run."""
    from trainpilot.energy import open_meter

    try:
        return open_meter(plan).start()
    except Exception:  # noqa: BLE001 - e.g. a bad TRAINPILOT_CPU_WATTS_PER_CORE: no energy figure
        return None


def _run_energy(epochs: list[dict[str, Any]]) -> Any:
    """The run's joules: the sum of its epochs' (None if any epoch has none), with their source."""
    from trainpilot.energy import EST, Energy

    values = [e.get("energy_j") for e in epochs]
    sources = list(dict.fromkeys(e.get("energy_source") for e in epochs if e.get("energy_source")))
    source = " + ".join(sources) if sources else "not metered"
    if not values or any(v is None for v in values):
        return Energy(None, source)
    return Energy(float(sum(values)), source, estimated=EST in source)


def _takes_energy(record: Any) -> bool:
    """Whether a predictor's `record` takes `energy=` (one written before energy was recorded may not)."""
    import inspect

    try:
        params = inspect.signature(record).parameters.values()
    except (TypeError, ValueError):
        return False
    return any(p.name == "energy" or p.kind is inspect.Parameter.VAR_KEYWORD for p in params)


def _observe_load(ui_steady: float | None = None) -> Any:
    """The machine's load before deciding, with the part this process's own UI (the threads
    beside this one) adds: the agent plans for the load the run will meet, itself included.
    With `ui_steady` (the UI's own measure of its steady load), that replaces what the UI's
    threads used during the window."""
    from trainpilot.machine.monitor import measure_load
    from trainpilot.machine.contention import ExternalCpuMeter, with_ui_load

    with ExternalCpuMeter() as meter:
        load = measure_load(0.3)
    seen = meter.result.ui_cores
    if ui_steady is None:
        return replace(load, ui_cores=round(seen, 3))
    return with_ui_load(load, seen, ui_steady)


def _switch_cost_s(profile: Any, old: Plan, new: Plan) -> float:
    """Predicted cost of moving the run between plans: copying weights and optimizer state (Adam:
    3x the weights) across the device boundary at a conservative 2 GB/s; free between CPU plans."""
    if old.backend == new.backend == "cpu":
        return 0.0
    return 3 * profile.weight_bytes / 2e9 + 0.05


def run_session(config: SessionConfig, **kwargs: Any) -> tuple[dict[str, Any], list[ev.Event]]:
    """Run a whole session and return (result, events): the simplest way to train from Python."""
    session = TrainingSession(config, **kwargs)
    collected = list(session.events())
    assert session.finished is not None
    return session.finished.result, collected
