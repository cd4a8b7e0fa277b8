"""`CostModel`: the calibrated roofline plus the run history, behind the `Predictor` protocol.

    model = CostModel.open()                     # this machine, the user's data directory
    model = CostModel.open(hardware=target)      # a described machine (TargetMachine)
    if not model.is_calibrated:
        model.calibrate(quick=True)
    prediction = model.predict(profile, plan, load)
    decision = model.decide(profile, predictions, load, hardware_state)
    model.record(profile, plan, load, predicted_s, actual_s, run_id=..., status="success", epochs_done=3)

Until the machine is calibrated it predicts with the first estimate and decides with the
documented rule cascade (`predict/first_estimate.py`), so the agent always has an answer.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trainpilot.plans import Decision, Plan, PlanPrediction
from trainpilot.predict.calibration import Calibration, load_calibration, save_calibration
from trainpilot.predict.confidence import confidence_from_margin
from trainpilot.predict.drift import DRIFT_MAX_RUNS, NO_DRIFT, Drift, Residual, drift, recent_residuals, residual_of
from trainpilot.predict.features import features_of
from trainpilot.predict.history import History, HistoryUnavailable, RunRecord
from trainpilot.predict.interval import (
    COLD,
    WARM,
    around,
    error_samples,
    log_bounds,
    noise_floor,
    prior_sigma,
    repeat_noise,
    runs_behind,
)
from trainpilot.predict.learning import (
    COLD_ERROR_FACTOR,
    Observation,
    agreed_probes,
    correction,
    measured_error,
    observe,
    similarities,
    state_weight,
    with_probes,
)
from trainpilot.predict.roofline import estimate

if TYPE_CHECKING:
    from trainpilot.job.workload import WorkloadProfile
    from trainpilot.machine.monitor import UtilizationSample
    from trainpilot.machine.probe import HardwareInfo

LOG = logging.getLogger("trainpilot.predict")
DESCRIBED_MARK = "predicted for a described machine"
HISTORY_WINDOW = 2000  # newest runs of this machine the model learns from (keeps thinking < 10 ms)


def _is_target(obj: Any) -> bool:
    return obj is not None and hasattr(obj, "cpu_flops_per_core") and hasattr(obj, "backends")


def _busy(load: UtilizationSample | None) -> float:
    return float(load.busy_cores) if load is not None else 0.0


class CostModel:
    """A `Predictor` (see `predict/predictor.py`). Build it with `CostModel.open`."""

    policy = "cost-model"

    def __init__(
        self,
        *,
        machine_id: str,
        logical_cpus: int,
        calibration: Calibration | None,
        calibration_dir: Path | None,
        history: History | None,
        described: Any = None,
        notices: list[str] | None = None,
        available_backends: list[str] | None = None,
    ):
        self.machine_id = machine_id
        self.logical_cpus = logical_cpus
        self.calibration = calibration
        self.calibration_dir = calibration_dir
        self.history = history
        self.described = described
        self.notices: list[str] = list(notices or [])
        self.available_backends = available_backends or ["cpu"]
        self._observations: list[Observation] | None = None
        self._fallback: Any = None
        self._sims_key: Any = None
        self._obs_version = 0  # bumped whenever the observations change, so cached similarities expire
        self._sims: list[float] = []
        self._residuals: list[Residual] = []  # the newest warm predictions' misses (drift.py)
        # "Now" for the drift, which weighs recent runs by age: the wall clock, or the moment a
        # recorded run was predicted at when a benchmark history is replayed (benchmarks/replay_decisions.py).
        self.clock: Callable[[], float] = time.time
        self._intervals: dict[
            Any, tuple[float, float, float]
        ] = {}  # (kind, state, fit, runs behind) -> bounds (interval.py)
        self._noise: dict[float, float] = {}  # load state -> the repeat noise there (interval.repeat_noise)
        self._errors: tuple[int, list[Any]] = (-1, [])  # (observation version, interval.error_samples)

    # ---------------------------------------------------------------- construction

    @classmethod
    def open(
        cls,
        home: Path | str | None = None,
        hardware: HardwareInfo | Any | None = None,
        *,
        history_path: Path | str | None = None,
    ) -> CostModel:
        """Open the model for this machine (`hardware` = a `HardwareInfo`, probed when None) or
        for a described machine (`hardware` = a `TargetMachine`). `home` overrides the data
        directory (default: `paths.data_home()`); `history_path` the history database alone."""
        from trainpilot import paths

        home_path = Path(home).expanduser() if home is not None else None
        cal_dir = (home_path / "calibration") if home_path else paths.calibration_dir()
        if history_path is None:
            history_path = (home_path / "history.sqlite3") if home_path else paths.history_db_path()
        notices: list[str] = []
        if _is_target(hardware):
            from trainpilot.predict.derive import calibration_for_target

            target_calibration = calibration_for_target(hardware)
            return cls(
                machine_id=target_calibration.machine_id,
                logical_cpus=target_calibration.logical_cpus,
                calibration=target_calibration,
                calibration_dir=None,
                history=None,  # runs here say nothing about a machine that is only described
                described=hardware,
                notices=[DESCRIBED_MARK + f": {target_calibration.described}"],
                available_backends=target_calibration.backends(),
            )
        if hardware is None:
            from trainpilot.backends import probe

            hardware = probe()
        calibration, why = load_calibration(cal_dir, hardware.machine_id)
        if why and calibration is None and "unreadable" in why:
            notices.append(why)
        history: History | None
        try:
            history = History(history_path)
            notices.extend(history.notices)
        except (HistoryUnavailable, OSError) as exc:
            history = None
            notices.append(f"run history unavailable ({exc}); predictions use the roofline only")
            LOG.warning(notices[-1])
        model = cls(
            machine_id=hardware.machine_id,
            logical_cpus=hardware.logical_cpus,
            calibration=calibration,
            calibration_dir=cal_dir,
            history=history,
            notices=notices,
            available_backends=hardware.available_backends() or ["cpu"],
        )
        model.observations()  # read the history now, so the agent's first think is as quick as the rest
        return model

    # ---------------------------------------------------------------- state

    @property
    def is_calibrated(self) -> bool:
        return self.calibration is not None

    @property
    def is_described(self) -> bool:
        return self.described is not None

    def plans(self) -> list[Plan]:
        """The plans this machine offers (the described machine's, or this one's available backends)."""
        if self.is_described:
            from trainpilot.predict.derive import target_plans

            return target_plans(self.described)
        from trainpilot.backends import get_backend

        out: list[Plan] = []
        for name in self.available_backends:
            out.extend(get_backend(name).plans(self.logical_cpus))
        return out

    def calibrate(
        self,
        progress: Callable[[float, str], None] | None = None,
        quick: bool = False,
        wait_budget_s: float | None = None,
    ) -> Calibration:
        """Measure this machine (every available backend, every thread count) and store it.
        `wait_budget_s`: how long it may wait for other processes to go quiet (see calibrate.py)."""
        if self.is_described:
            raise ValueError("a described machine cannot be measured; its calibration comes from its figures")
        from trainpilot.predict.calibrate import run_calibration

        measurable = [p for p in self.plans() if not p.is_compiled]  # compiling is calibrate_compile's
        calibration = run_calibration(
            self.machine_id, self.logical_cpus, measurable, progress=progress, quick=quick, wait_budget_s=wait_budget_s
        )
        kept = self.calibration.compile if self.calibration is not None else None
        if kept is not None and kept.torch_version == calibration.torch_version:
            calibration = replace(calibration, compile=kept)  # torch.compile was measured separately; still valid
        return self._store(calibration)

    def calibrate_compile(self, progress: Callable[[float, str], None] | None = None, specs: Any = None) -> Calibration:
        """Measure what torch.compile costs and gives here (how long on 2 cores: docs/prediction.md;
        see compile_cost.py) and add it to this machine's calibration, measuring that first if needed.
        `specs`: the networks to compile (default microbench.COMPILE_SUITE)."""
        if self.is_described:
            raise ValueError("a described machine cannot be measured; its calibration comes from its figures")
        from trainpilot.backends.compiled import compile_availability
        from trainpilot.predict.compile_cost import measure_compile

        avail = compile_availability()
        if not avail:
            raise RuntimeError(f"torch.compile cannot run here: {avail.reason}")
        say = progress or (lambda _f, _m: None)
        start = 0.0
        if self.calibration is None:  # the compiled plans' eager side first (quick; docs/prediction.md)
            self.calibrate(progress=lambda f, m: say(0.2 * f, m), quick=True)
            start = 0.2
        assert self.calibration is not None
        measured = measure_compile(self.logical_cpus, specs, progress=lambda f, m: say(start + (1 - start) * f, m))
        return self._store(replace(self.calibration, compile=measured))

    def _store(self, calibration: Calibration) -> Calibration:
        if self.calibration_dir is not None:
            save_calibration(calibration, self.calibration_dir)
        self.calibration = calibration
        self._observations = None  # ratios are relative to the roofline, which just changed
        self._obs_version += 1
        return calibration

    def observations(self) -> list[Observation]:
        if self._observations is None:
            records: list[RunRecord] = []
            if self.history is not None and self.calibration is not None:
                try:
                    records = self.history.records(self.machine_id, limit=HISTORY_WINDOW)
                except Exception as exc:  # a history we cannot read must not stop a prediction
                    self._note(f"could not read the run history: {exc}")
            self._observations = observe(records, self.calibration) if self.calibration else []
            self._residuals = recent_residuals(self._observations, self.clock())
            self._obs_version += 1
        return self._observations

    def _similarities(self, footprint: str, feats: Any, obs: list[Observation]) -> list[float]:
        key = (footprint, self._obs_version)
        if self._sims_key != key:
            self._sims_key, self._sims = key, similarities(obs, feats)
        return self._sims

    def _note(self, message: str) -> None:
        if message not in self.notices:
            self.notices.append(message)
            LOG.warning(message)

    def _fallback_predictor(self) -> Any:
        if self._fallback is None:
            from trainpilot.predict.first_estimate import FirstEstimate

            self._fallback = FirstEstimate(self.logical_cpus)
        return self._fallback

    # ---------------------------------------------------------------- Predictor protocol

    def predict(self, profile: WorkloadProfile, plan: Plan, load: UtilizationSample) -> PlanPrediction:
        if self.calibration is None:
            return self._fallback_predictor().predict(profile, plan, load)
        feats = self._agreed(profile.footprint, features_of(profile))
        # The load observed here is this machine's; a described machine is assumed idle.
        busy = 0.0 if self.is_described else _busy(load)
        unsupported = self._unsupported(profile, plan)
        if unsupported:
            return PlanPrediction(plan, None, excluded_reason=unsupported, source="roofline")
        roof = estimate(feats, plan, busy, self.calibration)
        if roof is None:
            if self.is_described:
                why = f"the described machine's figures cannot predict {plan.label} (Core ML picks its device)"
            elif plan.is_compiled and self.calibration.compile is None:
                why = "torch.compile not measured here yet (`trainpilot headless calibrate --compile`)"
            elif plan.memory_format or plan.precision:
                why = (
                    f"{plan.settings_key} not measured for {plan.backend} here yet (no probe of this job's step"
                    " there, nor a calibration of it: `trainpilot headless calibrate`)"
                )
            else:
                why = f"no calibration for {plan.label} on this machine (run `trainpilot headless calibrate`)"
            return PlanPrediction(plan, None, excluded_reason=why, source="roofline")
        memory_reason = self._memory_exclusion(feats, plan)
        if memory_reason:
            return PlanPrediction(plan, None, excluded_reason=memory_reason, source="roofline")
        obs = self.observations()
        sims = self._similarities(profile.footprint, feats, obs)
        corr = correction(obs, profile.footprint, feats, plan, state_weight(busy), sims)
        shift = self._drift(busy)
        prior = max(COLD_ERROR_FACTOR * roof.fit_error, 0.1)
        error, evidence = measured_error(obs, feats, prior, sims)
        run_s = roof.run_s * corr.factor * shift.factor
        source = "history" if corr.spoke else "roofline"
        detail: dict[str, Any] = {
            # a fresh model's first-step warm-up, or compiling, happens once per run, not per epoch
            "per_epoch_s": (
                run_s
                - (roof.breakdown.get("warmup", 0.0) + roof.breakdown.get("compile", 0.0)) * corr.factor * shift.factor
            )
            / feats.epochs,
            "roofline_s": roof.run_s,
            "correction": corr.factor,
            "drift": {"factor": round(shift.factor, 4), "recent_runs": shift.runs, "weight": round(shift.weight, 2)},
            "history_runs": {
                "same_workload": corr.exact_runs,
                "similar": corr.similar_runs,
                "weight": round(corr.weight, 2),
            },
            "relative_error": error,
            "error_evidence_runs": round(evidence, 1),
            "breakdown_s": {k: round(v, 4) for k, v in roof.breakdown.items()},
            "load": {
                "busy_cores": round(busy, 2),
                "busy_state_weight": round(roof.busy_weight, 2),
                "extra_factor": round(roof.extra_factor, 2),
            },
            "flops_per_s": {k: round(1.0 / c, 0) for k, c in self._rates(plan).items()},
        }
        if roof.note:
            detail["notes"] = roof.note  # the probe's, a setting's and the loading's notes, for the trace
        detail["interval"] = self._interval(run_s, obs, profile.footprint, plan, busy, roof.fit_error).to_dict()
        if self.is_described:
            detail["note"] = DESCRIBED_MARK
            detail["machine"] = self.calibration.described
        if plan.workers:  # a split plan: its shares and per-worker figures, for the trace
            from trainpilot.predict.split_cost import split_detail

            detail["split"] = split_detail(feats, plan, busy, self.calibration)
        return PlanPrediction(plan, run_s, source=source, detail=detail)

    def _agreed(self, footprint: str, feats: Any) -> Any:
        """A job probed before: the probes its recorded runs agree on, as its runs were learnt with
        (learning.probe_consensus), not this run's own probe alone."""
        return with_probes(feats, agreed_probes(self.observations(), footprint))

    def _interval(
        self, run_s: float, obs: list[Observation], footprint: str, plan: Plan, busy: float, fit_error: float
    ) -> Any:
        """The 80 % interval from the measured errors of this kind of prediction, never narrower than
        the measured repeat noise (interval.py); the errors are gathered once per history version,
        the noise once per load state, the bounds once per kind, load state and runs behind."""
        if self._errors[0] != self._obs_version:
            self._errors = (self._obs_version, error_samples(obs))
            self._intervals.clear()
            self._noise.clear()
        state = state_weight(busy)
        behind = runs_behind(obs, footprint, plan, state)
        kind = WARM if behind else COLD
        state_key = round(state, 3)
        key = (kind, state_key, round(fit_error, 3), behind)
        if state_key not in self._noise:
            self._noise[state_key] = repeat_noise(obs, state)[0]
        noise = self._noise[state_key]
        if key not in self._intervals:
            self._intervals[key] = log_bounds(self._errors[1], kind, state, prior_sigma(kind, fit_error, noise, behind))
        bounds = self._intervals[key]
        return around(run_s, noise_floor(bounds, noise, behind), kind)

    def _drift(self, busy: float) -> Drift:
        """How far this machine's recent runs strayed from their warm predictions (drift.py)."""
        if not self._residuals or self.is_described:
            return NO_DRIFT
        return drift(self._residuals, state_weight(busy), self.clock())

    def _rates(self, plan: Plan) -> dict[str, float]:
        cal = self.calibration.for_plan(plan) if self.calibration else None
        if cal is None:
            return {}
        return {k: cal.idle.coef[k] for k in ("conv", "dense", "recurrent") if cal.idle.coef.get(k, 0.0) > 0}

    def _unsupported(self, profile: WorkloadProfile, plan: Plan) -> str | None:
        """On a described machine nobody asked the backend whether it can run the workload (the
        agent does that for this machine's plans): ask it here, from the profile alone."""
        if not self.is_described or plan.backend != "ane":
            return None
        try:
            from trainpilot.backends import get_backend

            support = get_backend("ane").mode_support(profile)  # type: ignore[attr-defined]
        except Exception:  # noqa: BLE001 - the ANE package is optional; no answer is no exclusion
            return None
        avail = support.get(plan.mode) if isinstance(support, dict) else None
        return None if avail is None or avail.available else avail.reason

    def _memory_exclusion(self, feats: Any, plan: Plan) -> str | None:
        """A described machine's CPU memory bounds what can train there: weights, gradients and two
        Adam moments, plus a batch of activations kept for the backward pass."""
        if not self.is_described or plan.backend != "cpu":
            return None
        memory = getattr(self.described, "memory_bytes", None)
        need = 4 * feats.weight_bytes + 2 * feats.batch_size * feats.activation_bytes
        if memory and need > 0.8 * memory:
            return f"needs ~{need / 2**30:.1f} GiB, more than the machine's {memory / 2**30:.1f} GiB allows"
        return None

    @staticmethod
    def explain(prediction: PlanPrediction) -> str:
        """Where a prediction came from, in the words the trace shows."""
        shift = prediction.detail.get("drift", {})
        compiling = prediction.detail.get("breakdown_s", {}).get("compile")
        drifted = shift.get("recent_runs") and abs(shift.get("factor", 1.0) - 1.0) >= 0.01
        notes = (
            (f"; compiling takes ~{compiling:.1f}s of it" if compiling else "")
            + prediction.detail.get("split", {}).get("note", "")
            + (
                f"; x{shift['factor']:.2f} for how this machine's last {shift['recent_runs']} run(s) ran"
                if drifted
                else ""
            )
        )
        if prediction.source != "history":
            if prediction.source != "roofline":
                return prediction.source
            return "roofline: calibration only, no comparable runs yet" + notes
        runs = prediction.detail.get("history_runs", {})
        return (
            f"history: {runs.get('same_workload', 0)} run(s) of this workload, {runs.get('similar', 0)} similar;"
            f" x{prediction.detail.get('correction', 1.0):.2f} on the roofline{notes}"
        )

    def decide(
        self,
        profile: WorkloadProfile,
        predictions: list[PlanPrediction],
        load: UtilizationSample,
        hardware: dict[str, Any],
    ) -> Decision:
        if self.calibration is None:
            from trainpilot.predict.first_estimate import rule_cascade_decision

            decision = rule_cascade_decision(profile, predictions, load, hardware)
            note = "cost model: this machine is not calibrated yet, so the documented rule cascade decides"
            return Decision(
                decision.plan,
                decision.predicted_s,
                decision.confidence,
                (note, *decision.reasoning),
                decision.margin,
                decision.policy,
            )
        return self._decide_calibrated(profile, predictions, load)

    def _decide_calibrated(
        self, profile: WorkloadProfile, predictions: list[PlanPrediction], load: UtilizationSample
    ) -> Decision:
        lines: list[str] = []
        if self.is_described:
            lines.append(f"{DESCRIBED_MARK} '{self.calibration.described}' (figures, not measurements)")  # type: ignore[union-attr]
        # Each plan's prediction and each exclusion is already a step of the agent's trace (with
        # `explain`); the decision's reasoning adds only what compares them.
        timed = sorted(
            (p for p in predictions if not p.excluded and p.predicted_s is not None),
            key=lambda p: p.predicted_s,  # type: ignore[arg-type, return-value]
        )
        if not timed:
            # Nothing could be predicted: the CPU with every thread always exists.
            plan = Plan("cpu", threads=self.logical_cpus)
            lines.append(f"no plan could be predicted; running {plan.label}")
            return Decision(plan, None, 0.5, tuple(lines), None, policy=self.policy)
        best = timed[0]
        margin = None
        if len(timed) > 1:
            runner = timed[1]
            margin = runner.predicted_s / best.predicted_s - 1.0  # type: ignore[operator]
            lines.append(f"margin: {best.plan.label} is predicted {margin:.0%} faster than {runner.plan.label}")
        else:
            lines.append(f"only {best.plan.label} can run here")
        sigma = float(best.detail.get("relative_error", 0.3))
        if len(timed) > 1:
            sigma = max(sigma, float(timed[1].detail.get("relative_error", sigma)))
        confidence = confidence_from_margin(margin, sigma)
        evidence = best.detail.get("error_evidence_runs", 0)
        past = f"{evidence:.0f} comparable run" + ("" if round(evidence) == 1 else "s")
        lines.append(
            f"confidence {confidence:.2f}:"
            f" {'a ' + format(margin, '.0%') + ' margin' if margin is not None else 'a single plan'}"
            f" against ±{sigma:.0%} measured error ({past})"
        )
        from trainpilot.predict.split_cost import why_not_split

        lines.extend(why_not_split(timed, best))
        spoke = "history" if best.source == "history" else "roofline"
        lines.append(f"{spoke} spoke: choose {best.plan.label}, {best.predicted_s:.2f}s predicted")
        return Decision(best.plan, best.predicted_s, confidence, tuple(lines), margin, policy=self.policy)

    def record(
        self,
        profile: WorkloadProfile,
        plan: Plan,
        load: UtilizationSample,
        predicted_s: float | None,
        actual_s: float,
        *,
        run_id: str,
        status: str,
        epochs_done: int,
        energy: Any = None,
        row_id: int | None = None,
    ) -> None:
        """Store the run and learn from it. Never raises: a run must not fail because its
        history could not be written. `energy`: the run's `energy.Energy` (joules and source).
        `row_id`: the history row written when the run started (runlog.RunLog), which this
        finishes instead of adding a row."""
        if self.is_described:
            return  # this machine's timings say nothing about the described one
        try:
            if self.history is None:
                return
            from trainpilot.predict.history import run_record

            rec = replace(
                run_record(
                    run_id=run_id,
                    machine_id=self.machine_id,
                    profile=profile,
                    plan=plan,
                    load=load,
                    predicted_s=predicted_s,
                    actual_s=actual_s,
                    status=status,
                    epochs_done=epochs_done,
                ),
                energy_j=getattr(energy, "joules", None),
                energy_source=getattr(energy, "source", None),
            )
            if row_id is None:
                rid = self.history.add(rec)
            else:
                self.history.finish(row_id, rec)
                rid = row_id
            if self._observations is not None and self.calibration is not None:
                probes = agreed_probes(self._observations, rec.footprint)
                new = observe([replace(rec, id=rid)], self.calibration, {rec.footprint: probes} if probes else None)
                if new:
                    # its miss against the drift-free warm prediction, before it joins the history
                    found = residual_of(new[0], self._observations)
                    if found is not None:
                        self._residuals = [found, *self._residuals][:DRIFT_MAX_RUNS]
                self._observations = new + self._observations
                self._obs_version += 1
        except Exception as exc:  # noqa: BLE001 - by contract
            self._note(f"could not record run {run_id} in the history: {type(exc).__name__}: {exc}")
