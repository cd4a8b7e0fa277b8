"""The closed loop: the agent keeps deciding while the run trains.

At step boundaries it reads the watch (watch.py): the CPU other processes use and the pace of the
run's own steps. A change is declared only when it lasts (LOAD_SUSTAIN windows of other processes'
CPU moved by LOAD_STEP cores or more; PACE_SUSTAIN windows of steps PACE_RATIO times off their own
settled pace and outside the prediction's interval), never on one outlier. On a change it asks the
agent to predict every plan under the load now seen and applies the rule of replan.py; a move goes
through the same path an override takes (plan_switch.py), so the weights and the optimizer state
follow and the app learns of it from the same `BackendChosen` event, with source "replan".

A move rests on what the run measured (measured_paces.py): the current plan's pace under the load
now, each other plan's pace where this run or an earlier run of this workload met it under a like
load; a prediction, scaled by the run's bias, only where nothing was measured. A decision that
rests on such a prediction inside its noise is settled on the run's own steps under the load (a
near-tie trial, near_tie.py), not on the prediction. A move is checked on the steps that follow it:
if the new plan steps slower than the old one did just before the move, the run moves back and the
plan is not tried again under that load. A near tie the cost model cannot call is settled on the
run's own steps once, early; a load that arrives during that trial suspends it: the load is decided
first, and the tie is tried again once the machine is steady. A near tie the run is too short to
verify runs PyTorch's default way of the two (what every peer would have run).

A user's override pins the plan: the loop keeps watching but never moves it, until `release`.
The loop never imports the agent's internals: it asks the predictor, through the session.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from trainpilot import events as ev
from trainpilot.plans import COMPILED, Plan
from trainpilot.run.measured_paces import MeasuredPaces, history_paces
from trainpilot.run.near_tie import Trial, Verdict, default_distance, trial_plan
from trainpilot.run.plan_choice import runs_natively
from trainpilot.run.replan import Option, Rethink, clamp_bias, rethink
from trainpilot.run.state import Segment
from trainpilot.run.watch import Watch, Window
from trainpilot.units import seconds as fmt_s

if TYPE_CHECKING:
    from trainpilot.run.session import TrainingSession

LOAD_STEP = 0.5  # cores: less is the noise of a desktop's background; a busy core is 1.0
LOAD_SUSTAIN = 2  # windows (about a second)
PACE_RATIO = 1.4  # beyond the 10-30 % a single window moves on a shared machine
PACE_SUSTAIN = 3  # windows
SETTLE_WINDOWS = 2  # windows of a plan's steps that set its pace
NEAR_TIE_MISS = 1.25  # a runner-up predicted within this of the chosen plan's measured step is worth a trial
MOVE_BACK = 1.10  # a move whose new plan steps this much slower than the old one did is undone
MAX_SUSPENSIONS = 2  # a near-tie trial a changing load keeps stopping is given up: the machine is not steady
ADAPT_MODES = ("on", "verify", "off")


@dataclass
class Phase:
    """Steps of one plan under one load, from its pace settling to the next change: what the cost
    model learns the machine under load from (run/learning.py)."""

    plan: Plan
    others: float  # other processes' cores
    steps: int = 0
    seconds: float = 0.0


class ClosedLoop:
    def __init__(self, session: TrainingSession, watch: Watch | None = None):
        self.s = session
        self.mode = session.config.adapt
        self.watch = watch or Watch()
        self.active = False  # whether the loop watches at all (off: today's one decision)
        self.pinned: str | None = None  # why the agent may not move the run (the user's choice)
        self.load: Any = None  # the UtilizationSample the current plan's predictions are made for
        self.load_base = 0.0  # other processes' cores the current plan was chosen under
        self.last_others = 0.0  # other processes' cores in the latest window
        self._recent: list[Window] = []  # the latest windows, for a hand back (the settled pace may be old)
        self._load_streak: list[Window] = []
        self._pace_streak: list[Window] = []
        self._settling: list[Window] = []
        self.pace: float | None = None  # the current plan's settled step time
        self.bias = 1.0  # measured over predicted step time, on the plan that set `pace`
        self.trial: Trial | None = None
        self.trial_trigger = "verify"  # what started the trial: a near tie ("verify"), or a change ("load", ...)
        self._block_done = False
        self.tried = False
        self._suspended = False  # a near-tie trial a load stopped: tried again once the machine is steady
        self._suspensions = 0
        self._after_move: tuple[Plan, float, str] | None = None  # (plan left, its pace then, trigger)
        self.refuted: set[Plan] = set()  # moves that did not pay under the load now seen
        self.move_costs: dict[tuple[str, str], float] = {}  # measured, by kind of move
        # Each plan's step as measured, by the whole cores other processes used then: where the run
        # (or an earlier run of this workload) met a plan under a load, that beats any prediction of
        # it (a load that leaves finds the idle plan's pace measured before it came).
        self.measured = MeasuredPaces()
        self.phases: list[Phase] = []
        self._phase: Phase | None = None

    # ---------------------------------------------------------------- start and end

    def begin(self, load: Any, source: str) -> Iterator[ev.Event]:
        """The run's first plan is in place: say whether and how the loop watches it."""
        s = self.s
        self.load = load
        self.load_base = max(float(getattr(load, "busy_cores", 0.0)) - float(getattr(load, "ui_cores", 0.0)), 0.0)
        self.last_others = self.load_base
        self._recent = []
        self.measured = MeasuredPaces(self._history_paces())
        why_not = self._why_off(source)
        if why_not:
            yield ev.AgentStepped(s.run_id, "act", why_not, None, {"adapt": self.mode})
            if self.pinned is None:
                return
        self.active = True
        self.watch.start()
        self.watch.moved()  # the run's first step warms up (allocations, the thread pool)

    def _history_paces(self) -> dict[tuple[Plan, int], float]:
        from trainpilot.run.runlog import history_of

        agent, profile = self.s._orchestrator, self.s.profile
        if agent is None or profile is None:
            return {}
        return history_paces(history_of(agent.predictor), agent.hardware.machine_id, profile.footprint)

    def _why_off(self, source: str) -> str | None:
        s = self.s
        if self.mode == "off":
            return "adaptation off (--adapt off): the plan stays as decided for the whole run"
        reason = s.strategy.adapt_off_reason()
        if reason:
            self.mode = "off"
            return f"adaptation off: {reason}"
        if s.config.objective != "time":
            self.mode = "off"
            return (
                f"adaptation off: it compares measured step times, and --objective {s.config.objective}"
                " weighs energy, which is predicted per plan, not measured per step"
            )
        if source in ("user", "fallback"):
            self.pinned = "your choice (--backend, --threads, --compile)" if source == "user" else "a fallback"
            return f"the plan is pinned by {self.pinned}: the agent watches the run but does not move it"
        return None

    def end(self) -> None:
        self._close_phase()
        self.watch.close()

    def _close_phase(self) -> None:
        if self._phase is not None and self._phase.steps:
            self.phases.append(self._phase)
        self._phase = None

    # ---------------------------------------------------------------- the step loop's hooks

    def stepped(self, seconds: float) -> None:
        if not self.active:
            return
        self.watch.stepped(seconds)
        if self.trial is not None:
            if self.trial.stepped(seconds):
                self._block_done = True
        elif self._phase is not None:
            self._phase.steps += 1
            self._phase.seconds += seconds

    def user_moved(self) -> Iterator[ev.Event]:
        """A user override took the run: the agent stops moving it until it is handed back."""
        if self.trial is not None:
            self.trial = None
            self.tried = True
        self.watch.moved()
        self._reset_pace()
        self._recent = []
        self._after_move = None
        if self.mode != "off" and self.pinned is None:
            self.pinned = "your override"
            self.active = True
            yield ev.AgentStepped(
                self.s.run_id,
                "act",
                "the plan is pinned by your override: the agent watches but does not move it until you hand"
                " the run back",
                None,
                {"adapt": "pinned"},
            )
        else:
            self.pinned = self.pinned or "your override"

    def pin(self, why: str) -> None:
        """No more moves by the agent (a fallback: the plan it left failed)."""
        self.trial = None
        self.pinned = why

    def release(self, segments: list[Segment]) -> Iterator[ev.Event]:
        """The user hands the run back: the agent decides again, under the load now seen."""
        s = self.s
        if self.mode == "off":
            yield ev.AgentStepped(s.run_id, "act", "nothing to hand back: adaptation is off for this run", None, {})
            return
        if self.pinned is None:
            yield ev.AgentStepped(s.run_id, "act", "the run is already the agent's: nothing pinned it", None, {})
            return
        self.pinned = None
        yield ev.AgentStepped(
            s.run_id, "act", "you handed the run back: the agent decides again", None, {"adapt": "released"}
        )
        if self.mode == "on":
            recent = _median_step(self._recent)  # the pace now: the load may have changed while pinned
            measured = recent is not None
            step = recent or self._predicted_step(s.plan, self.load)  # type: ignore[arg-type]
            if step:
                yield from self._rethink("release", self.last_others, step, segments, measured=measured)

    def at_boundary(self, segments: list[Segment]) -> Iterator[ev.Event]:
        if not self.active or self.s.trains_whole_epochs():
            return
        if self.trial is not None and self._block_done:
            self._block_done = False
            yield from self._next_block(segments)
        window = self.watch.boundary()
        if window is None:
            return
        self.last_others = window.others
        self._recent = [*self._recent[-(LOAD_SUSTAIN - 1) :], window]
        load_change = self._load_changed(window)
        if self.trial is not None:
            # a trial compares plans on a steady machine: one window of a changed load spoils it
            if load_change is not None or abs(window.others - self.load_base) >= LOAD_STEP:
                yield from self._abort_trial(segments, "the load changed")
            return
        self._settle(window)
        if self.pinned is not None:
            return
        if self._after_move is not None and self.pace is not None:
            yield from self._check_move(segments)
            return
        if self.mode == "on" and load_change is not None:
            # the streak's first window straddles the change: the plan's pace under the new load is
            # what the windows after it measured
            step = _median_step(self._load_streak[1:] or self._load_streak) or self.pace
            self._load_streak = []
            if step:
                yield from self._rethink("load", load_change, step, segments)
            return
        if self.mode == "on" and self._pace_changed(window):
            step = _median_step(self._pace_streak)
            self._pace_streak = []
            if step:
                yield from self._rethink("pace", window.others, step, segments)
            return
        if not self.tried and self.pace is not None:
            self.tried = True
            yield from self._maybe_verify(segments)

    # ---------------------------------------------------------------- watching

    def _load_changed(self, window: Window) -> float | None:
        """Other processes' cores, once a change of LOAD_STEP or more has lasted; else None."""
        delta = window.others - self.load_base
        if abs(delta) < LOAD_STEP:
            self._load_streak = []
            return None
        if self._load_streak and (self._load_streak[-1].others - self.load_base) * delta < 0:
            self._load_streak = []
        self._load_streak.append(window)
        if len(self._load_streak) < LOAD_SUSTAIN:
            return None
        return statistics.fmean(w.others for w in self._load_streak)

    def _settle(self, window: Window) -> None:
        if self.pace is not None or window.step_s is None:
            return
        self._settling.append(window)
        if len(self._settling) > SETTLE_WINDOWS:  # the first window after a move still warms up
            settled = self._settling[1:]
            self.pace = statistics.median(w.step_s for w in settled if w.step_s is not None)
            # The load as it is beside this plan: a busy process takes more of the machine once the
            # run uses fewer threads, so the base a change is measured from is read again here (a
            # change of a step or more is left to the change detection: it may be a new load).
            # Windows that disagree by a step or more saw a load come or go while the pace settled:
            # the base stays, so that change is still a change (not absorbed into the base).
            others = [w.others for w in settled]
            seen = statistics.median(others)
            if abs(seen - self.load_base) < LOAD_STEP and max(others) - min(others) < LOAD_STEP:
                self.load_base = seen
            predicted = self._predicted_step(self.s.plan, self.load)  # type: ignore[arg-type]
            self.bias = clamp_bias(self.pace, predicted)
            self.measured.note(self.s.plan, self.load_base, self.pace)  # type: ignore[arg-type]
            self._phase = Phase(self.s.plan, self.load_base)  # type: ignore[arg-type]

    def _pace_changed(self, window: Window) -> bool:
        if self.pace is None or window.step_s is None:
            return False
        ratio = window.step_s / self.pace
        low, high = self._predicted_step_bounds()
        outside = (high is None or window.step_s > high) if ratio > 1 else (low is None or window.step_s < low)
        if outside and (ratio >= PACE_RATIO or ratio <= 1 / PACE_RATIO):
            self._pace_streak.append(window)
        else:
            self._pace_streak = []
        return len(self._pace_streak) >= PACE_SUSTAIN

    def _reset_pace(self) -> None:
        self._close_phase()
        self.pace, self._settling, self._pace_streak, self._load_streak = None, [], [], []

    # ---------------------------------------------------------------- predictions

    def _steps_left(self) -> tuple[int, int]:
        s = self.s
        epoch, step, _ = s.position
        per_epoch = s.trainer.steps_per_epoch
        return (s.config.epochs - epoch - 1) * per_epoch + (per_epoch - step), per_epoch  # type: ignore[operator]

    def _predicted_step(self, plan: Plan, load: Any) -> float | None:
        prediction = self._prediction(plan, load)
        if prediction is None:
            return None
        from trainpilot.run.forecast import per_epoch_of

        epochs = getattr(self.s.profile, "epochs", 1) or 1
        return per_epoch_of(prediction, epochs) / self._steps_left()[1]

    def _prediction(self, plan: Plan, load: Any) -> Any:
        s = self.s
        if load is self.load and plan in s.forecast.predictions:
            p = s.forecast.predictions[plan]
        else:
            try:
                p = s._orchestrator.predictor.predict(s.profile, plan, load)
            except Exception:  # noqa: BLE001 - a plan the model cannot predict is not an option
                return None
        return p if p is not None and p.predicted_s is not None and not p.excluded else None

    def _predicted_step_bounds(self) -> tuple[float | None, float | None]:
        s = self.s
        step = self._predicted_step(s.plan, self.load)  # type: ignore[arg-type]
        if step is None:
            return None, None
        return s.forecast.bounds(s.plan, step)

    def _candidates(self) -> list[Plan]:
        """The plans the agent predicted at the start that a run may move to mid-way: not one that
        compiles (its compile time is not a switch), and each in a precision its device runs."""
        s = self.s
        current = s.plan
        out = []
        for plan, prediction in s.forecast.predictions.items():
            if prediction.predicted_s is None or prediction.excluded or plan == current:
                continue
            if plan.mode == COMPILED and not (current is not None and current.mode == COMPILED):
                continue
            if not s.forecast.predicts(plan) or not runs_natively(plan):
                continue
            out.append(plan)
        return out

    def _move_cost(self, plan: Plan, step_s: float) -> float:
        from trainpilot.run.forecast import switch_cost_s

        s = self.s
        measured = self.move_costs.get(_move_kind(s.plan, plan))  # type: ignore[arg-type]
        predicted = switch_cost_s(s.profile, s.plan, plan)  # type: ignore[arg-type]
        return (measured if measured is not None else predicted) + step_s  # the new plan's first step warms up

    def _load_sample(self, others: float) -> Any:
        from trainpilot.machine.contention import ExternalCpu

        ui = float(getattr(self.load, "ui_cores", 0.0) or 0.0)
        return ExternalCpu(1.0, others + ui, ui).as_sample(self.s.logical_cpus)

    # ---------------------------------------------------------------- re-thinking and moving

    def _rethink(
        self, trigger: str, others: float, step_s: float, segments: list[Segment], measured: bool = True
    ) -> Iterator[ev.Event]:
        s = self.s
        current: Plan = s.plan  # type: ignore[assignment]
        load = self._load_sample(others)
        predicted_before = self._predicted_step(current, self.load)
        if others != self.load_base:
            self.refuted = set()  # what did not pay under the old load may under this one
        if measured:
            self.measured.note(current, others, step_s)
        remaining, _ = self._steps_left()
        options = [o for o in (self._option(plan, others, load) for plan in self._candidates()) if o is not None]
        decision = rethink(current, step_s, remaining, options)
        pace_text = f"; steps run {step_s / predicted_before:.1f}x their prediction" if predicted_before else ""
        if trigger == "pace":
            settled = step_s / (self.pace or step_s)
            seen = f"steps take {settled:.1f}x their settled pace; other processes use {others:.1f} core(s)"
        elif trigger == "release":
            seen = f"other processes use {others:.1f} core(s){pace_text}"
        else:
            seen = f"other processes now use {others:.1f} core(s) (was {self.load_base:.1f}){pace_text}"
        yield ev.AgentStepped(s.run_id, "observe", seen, None, {"trigger": trigger, "other_cores": round(others, 3)})
        tie = measured and not decision.moves and self._inside_the_noise(decision)
        if not tie:
            yield ev.AgentStepped(s.run_id, "think", decision.text(), None, _think_data(decision))
        self._adopt_load(load, others)
        if decision.moves and decision.best is not None:
            # a move is checked against the pace it left, where that pace was measured
            yield from self._move(decision.best.plan, trigger, decision.text(), step_s if measured else None, segments)
        elif tie and decision.best is not None:
            # the decision rests on a prediction inside its noise: measure it on the run's own steps
            self._reset_pace()
            yield from self._verify(current, decision.best.plan, decision.best.step_s, step_s, trigger, segments)
        else:
            self._reset_pace()

    def _option(self, plan: Plan, others: float, load: Any) -> Option | None:
        """Another plan's step under this load: measured where it was met under a like load, else
        predicted and scaled by the run's bias (the cost model's miss on this job, seen on its steps)."""
        if plan in self.refuted:
            return None
        met = self.measured.get(plan, others)
        if met is not None:
            step, where = met
            return Option(plan, step, self._move_cost(plan, step), True, where)
        predicted = self._predicted_step(plan, load)
        if predicted is None:
            return None
        step = predicted * self.bias
        return Option(plan, step, self._move_cost(plan, step))

    def _inside_the_noise(self, decision: Rethink) -> bool:
        """Whether the best other plan, known only by prediction, could be faster than the current
        plan measured: predicted within a cold prediction's usual miss, or its interval reaching."""
        best = decision.best
        if best is None or best.measured:
            return False
        if best.step_s <= NEAR_TIE_MISS * decision.current_step_s:
            return True
        # a predicted option exists only where the predictor answered (_option): its interval is the forecast's
        low, _high = self.s.forecast.bounds(best.plan, best.step_s)
        return low is not None and low <= decision.current_step_s

    def _adopt_load(self, load: Any, others: float) -> None:
        """Predictions from now on are for this load: the epochs' predicted times, the ETA."""
        s = self.s
        self.load, self.load_base = load, others
        current = [s.plan] if s.plan is not None else []
        for plan in [*current, *self._candidates()]:
            try:
                prediction = s._orchestrator.predictor.predict(s.profile, plan, load)
            except Exception:  # noqa: BLE001 - keep the earlier prediction
                continue
            if prediction is not None and prediction.predicted_s is not None:
                s.forecast.predictions[plan] = prediction

    def _move(
        self, plan: Plan, trigger: str, reason: str, old_step: float | None, segments: list[Segment]
    ) -> Iterator[ev.Event]:
        s = self.s
        epoch, step, _ = s.position
        old: Plan = s.plan  # type: ignore[assignment]
        yield ev.AgentStepped(
            s.run_id,
            "act",
            f"moving to {plan.short_label} at epoch {epoch + 1}, step {step}",
            None,
            {"trigger": trigger},
        )
        yield from s.switcher.switch(plan, "replan", reason, None, self.load, trigger=trigger)
        self._moved(old, segments)
        if trigger != "verify" and old_step is not None:
            self._after_move = (old, old_step, trigger)

    def _moved(self, old: Plan, segments: list[Segment]) -> None:
        s = self.s
        if s.plan != old:
            self.move_costs[_move_kind(old, s.plan)] = s.switcher.last_move_s  # type: ignore[arg-type]
        segments.append(Segment(s.plan))  # type: ignore[arg-type]
        self.watch.moved()
        self._reset_pace()
        self._recent = []

    def _check_move(self, segments: list[Segment]) -> Iterator[ev.Event]:
        """The new plan's pace has settled: keep the move if it paid, else move to the plan measured
        fastest under this load (the one it left, or one the run met there before)."""
        s = self.s
        assert self._after_move is not None and self.pace is not None
        old, old_step, trigger = self._after_move
        self._after_move = None
        new: Plan = s.plan  # type: ignore[assignment]
        back, back_step = old, old_step
        for plan, step in self.measured.run_paces(self.load_base).items():
            if plan != new and plan not in self.refuted and step < back_step and plan in self._candidates():
                back, back_step = plan, step
        if self.pace <= back_step * MOVE_BACK or s.plan == back:
            yield ev.AgentStepped(
                s.run_id,
                "observe",
                f"{new.short_label} steps in {fmt_s(self.pace)}, against {fmt_s(old_step)} on {old.short_label}"
                " before the move: the move paid",
                None,
                {"trigger": "verify"},
            )
            return
        self.refuted.add(new)
        where = "before the move" if back == old else "measured earlier under this load"
        reason = (
            f"{new.short_label} steps in {fmt_s(self.pace)}, {self.pace / back_step:.2f}x the {fmt_s(back_step)}"
            f" of {back.short_label} {where}: the move did not pay; moving to {back.short_label}"
        )
        yield ev.AgentStepped(s.run_id, "observe", reason, None, {"trigger": "verify"})
        yield from self._move(back, "verify", reason, self.pace, segments)

    # ---------------------------------------------------------------- near ties

    def _maybe_verify(self, segments: list[Segment]) -> Iterator[ev.Event]:
        """Once, when the chosen plan's pace has settled: is its runner-up inside the noise?"""
        s = self.s
        current: Plan = s.plan  # type: ignore[assignment]
        assert self.pace is not None
        resumed, self._suspended = self._suspended, False
        runner = self._runner_up(current)
        if runner is None:
            return
        if resumed:
            yield ev.AgentStepped(
                s.run_id,
                "think",
                "the machine is steady again: the near tie is tried again",
                None,
                {"trigger": "verify"},
            )
        if runner.measured:
            # measured before (earlier in the run, or earlier runs of this workload): no trial needed
            remaining, _ = self._steps_left()
            decision = rethink(current, self.pace, remaining, [runner])
            yield ev.AgentStepped(s.run_id, "think", decision.text(), None, _think_data(decision))
            if decision.moves:
                yield from self._move(runner.plan, "verify", decision.text(), self.pace, segments)
            return
        yield from self._verify(current, runner.plan, runner.step_s, self.pace, "verify", segments)

    def _verify(
        self, current: Plan, plan: Plan, step: float, pace: float, trigger: str, segments: list[Segment]
    ) -> Iterator[ev.Event]:
        """Settle `current` (measured at `pace`) against `plan` (predicted at `step`) on the run's
        own steps; where the run is too short for that, run PyTorch's default way of the two."""
        s = self.s
        remaining, _ = self._steps_left()
        spec = trial_plan(current, plan, pace, pace * remaining)
        where = "" if trigger == "verify" else " under this load"
        if not spec.affordable:
            from trainpilot.run.near_tie import BUDGET_FRACTION, MIN_PAIRS

            need = MIN_PAIRS * (spec.block_steps + 1) * pace
            short = (
                f"near tie{where}: {plan.short_label} predicted {fmt_s(step)} a step, {current.short_label}"
                f" measured {fmt_s(pace)}; too short to verify ({MIN_PAIRS} block pairs need ~{fmt_s(need)} on"
                f" each plan, over {BUDGET_FRACTION:.0%} of the {fmt_s(pace * remaining)} left)"
            )
            keep = self._unverified_choice(current, plan, step, pace)
            if keep == current and default_distance(current, s.logical_cpus) > default_distance(plan, s.logical_cpus):
                said = (
                    f"{current.short_label} stays: its measured pace is inside its prediction,"
                    f" {plan.short_label}'s is slower"
                )
            else:
                said = f"{keep.short_label}, PyTorch's default way of the two, " + (
                    "stays" if keep == current else "runs"
                )
            yield ev.AgentStepped(
                s.run_id,
                "think",
                f"{short}: {said}",
                None,
                {"trigger": trigger, "verified": False, "kept": keep.to_dict()},
            )
            if keep != current:
                yield from self._move(keep, trigger, "near tie too short to verify", None, segments)
            return
        self.trial = Trial(spec)
        self.trial_trigger = trigger
        self._close_phase()
        yield ev.AgentStepped(
            s.run_id,
            "think",
            f"near tie{where}: {plan.short_label} (predicted {fmt_s(step)} a step) is inside the noise of"
            f" {current.short_label} (measured {fmt_s(pace)}); verifying on the run's own steps",
            None,
            {"trigger": trigger},
        )
        yield ev.AgentStepped(
            s.run_id,
            "act",
            f"alternating blocks of {spec.block_steps} steps, at most {spec.pairs} pairs"
            f" ({fmt_s(spec.budget_s)} at most on {plan.short_label})",
            None,
            {"trigger": trigger, "block_steps": spec.block_steps, "pairs": spec.pairs},
        )

    def _unverified_choice(self, current: Plan, other: Plan, other_step: float, pace: float) -> Plan:
        """A near tie the run cannot verify: PyTorch's default way of the two (what every peer would
        have run), unless the run's own steps bear the prediction out: the current plan measured
        inside its prediction's interval and the other predicted no faster than that measurement."""
        default = min((current, other), key=lambda p: default_distance(p, self.s.logical_cpus))
        if default == current:
            return current
        _low, high = self._predicted_step_bounds()
        borne_out = high is not None and pace <= high and other_step >= pace
        return current if borne_out else default

    def _runner_up(self, current: Plan) -> Option | None:
        """The fastest other plan, if it is worth a look: measured before under this load, or a near
        tie: its interval reaches the chosen plan's, or the chosen plan's measured step (the cost
        model's miss corrected out of neither)."""
        s = self.s
        best: tuple[Option, float] | None = None
        for plan in self._candidates():
            met = self.measured.get(plan, self.load_base)
            if met is not None:
                option = Option(plan, met[0], self._move_cost(plan, met[0]), True, met[1])
                low = met[0]
            else:
                step = self._predicted_step(plan, self.load)
                if step is None:
                    continue
                option = Option(plan, step, self._move_cost(plan, step))
                low_bound, _high = s.forecast.bounds(plan, step)
                low = low_bound if low_bound is not None else step
            if best is None or option.step_s < best[0].step_s:
                best = (option, low)
        if best is None:
            return None
        option, low = best
        if option.measured:
            return option
        _low, high = self._predicted_step_bounds()
        assert self.pace is not None
        # the runner-up's interval reaches the chosen plan's, or its measured step; or the runner-up
        # is predicted within a cold prediction's usual miss of what the chosen plan measured
        if low <= max(high or 0.0, self.pace) or option.step_s <= NEAR_TIE_MISS * self.pace:
            return option
        return None

    def _next_block(self, segments: list[Segment]) -> Iterator[ev.Event]:
        s = self.s
        trial = self.trial
        assert trial is not None
        verdict = trial.verdict()
        if verdict is not None:
            yield from self._settle_trial(verdict, segments)
            return
        plan = trial.plan_now()
        if plan != s.plan:
            old: Plan = s.plan  # type: ignore[assignment]
            yield from s.switcher.switch(plan, "replan", "near-tie trial", None, self.load, announce=False)
            self._moved(old, segments)

    def _settle_trial(self, verdict: Verdict, segments: list[Segment]) -> Iterator[ev.Event]:
        s = self.s
        self.trial = None
        trigger = self.trial_trigger
        if trigger != "verify":
            self.tried = True  # the trial under the load answered what a near-tie trial would ask
        for plan, step in verdict.medians().items():
            self.measured.note(plan, self.load_base, step)
        keep = verdict.keep(s.logical_cpus)
        text = verdict.text(s.logical_cpus)
        yield ev.AgentStepped(
            s.run_id,
            "think",
            text,
            None,
            {"trigger": trigger, "ratio": verdict.ratio, "pairs": verdict.pairs, "decided": verdict.decided},
        )
        old: Plan = s.plan  # type: ignore[assignment]
        if keep == verdict.spec.first:
            if s.plan != keep:
                yield from s.switcher.switch(keep, "replan", "near-tie trial", None, self.load, announce=False)
                self._moved(old, segments)
            return
        epoch, step, _ = s.position
        yield ev.AgentStepped(
            s.run_id,
            "act",
            f"moving to {keep.short_label} at epoch {epoch + 1}, step {step}",
            None,
            {"trigger": trigger},
        )
        yield from s.switcher.switch(keep, "replan", text, None, self.load, trigger=trigger)
        self._moved(old, segments)

    def _abort_trial(self, segments: list[Segment], why: str) -> Iterator[ev.Event]:
        s = self.s
        trial, self.trial = self.trial, None
        assert trial is not None
        self._load_streak = []  # declared again on the chosen plan's own steps
        if self.trial_trigger == "verify" and self._suspensions < MAX_SUSPENSIONS:
            # the tie is still open: the load is decided first, then the tie is tried again
            self.tried, self._suspended = False, True
            self._suspensions += 1
            text = f"near-tie trial suspended: {why}; back to {trial.spec.first.short_label}, the load is decided first"
        elif self.trial_trigger == "verify":
            text = f"near-tie trial stopped: {why} again; back to {trial.spec.first.short_label}, the tie left open"
        else:
            text = f"trial under the load stopped: {why}; back to {trial.spec.first.short_label}"
        yield ev.AgentStepped(s.run_id, "act", text, None, {"trigger": self.trial_trigger})
        if s.plan != trial.spec.first:
            old: Plan = s.plan  # type: ignore[assignment]
            yield from s.switcher.switch(trial.spec.first, "replan", "near-tie trial", None, self.load, announce=False)
            self._moved(old, segments)
        else:
            self.watch.moved()
            self._reset_pace()


def _median_step(windows: list[Window]) -> float | None:
    steps = [w.step_s for w in windows if w.step_s is not None]
    return statistics.median(steps) if steps else None


def _move_kind(old: Plan, new: Plan) -> tuple[str, str]:
    """Moves alike in cost: between devices, and whether DataLoader workers restart."""
    return (
        old.backend + ("+loaders" if old.loader_workers else ""),
        new.backend + ("+loaders" if new.loader_workers else ""),
    )


def _think_data(decision: Rethink) -> dict[str, Any]:
    return {
        "trigger_rule": "replan",
        "moves": decision.moves,
        "current_s": decision.current_s,
        "best": decision.best.plan.to_dict() if decision.best else None,
        "best_s": decision.best_s,
        "move_s": decision.best.move_s if decision.best else None,
    }
