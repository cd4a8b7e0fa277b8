"""Moving a run between plans at a step boundary (the agent's choice, an override, a fallback),
and falling back to the CPU from the last good state when a device plan fails.

The weights and optimizer state move with the trainer (trainer.use_plan); what this keeps is the
last good state to come back to, and what each move is predicted to cost.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from trainpilot import events as ev
from trainpilot.errors import describe_exception
from trainpilot.plans import Plan
from trainpilot.run.forecast import switch_cost_s
from trainpilot.run.plan_choice import fallback_plan
from trainpilot.run.state import Snapshot

if TYPE_CHECKING:
    from trainpilot.run.session import TrainingSession


class PlanSwitch:
    def __init__(self, session: TrainingSession):
        self.s = session
        self.last_good: Snapshot | None = None  # where a failed device plan restarts, on the CPU
        self.last_move_s = 0.0  # the wall time of the latest move (weights, optimizer state, loaders)

    def switch(
        self,
        plan: Plan,
        source: str,
        reason: str,
        confidence: float | None,
        load: Any,
        trigger: str | None = None,
        announce: bool = True,
    ) -> Iterator[ev.Event]:
        """Move the run to `plan` at this step boundary. `announce=False`: a block of a near-tie
        trial (closed_loop.py), which the trial's own trace lines report instead of a plan change."""
        import time

        s = self.s
        switch_cost = switch_cost_s(s.profile, s.plan, plan) if s.plan is not None and s.profile is not None else None
        if not plan.is_last_resort:
            # The last good state to come back to if the device (or compiling) fails (eager CPU
            # needs none: its failure is a bug or bad input, not something another plan can fix).
            epoch, step, totals = s.position
            self.last_good = Snapshot(epoch, step, totals.copy(), s.trainer.snapshot())
        started = time.perf_counter()
        try:
            s.trainer.use_plan(plan)
        except Exception as exc:
            if plan.is_last_resort:
                raise
            yield from self.fall_back(f"moving to {plan.short_label} failed: {describe_exception(exc)}", load)
            return
        self.last_move_s = time.perf_counter() - started  # what moving cost, measured (the closed loop weighs it)
        s.plan = plan
        if s.energy_meter is not None:
            s.energy_meter.cover(plan)  # a run moved to a device: count the device's energy too
        if not announce:
            return
        per_epoch = s.forecast.epoch_s(plan, load)
        remaining = per_epoch * max(s.config.epochs - len(s.rt.epoch_records), 0) if per_epoch else None  # type: ignore[operator]
        change: dict[str, Any] = {
            "plan": plan.to_dict(),
            "source": source,
            "reason": reason,
            "at_epoch": s.position[0] + 1,
            "at_step": s.position[1],
        }
        if trigger is not None:
            change["trigger"] = trigger
        s.rt.plan_changes.append(change)
        low, high = s.forecast.bounds(plan, remaining)
        yield ev.BackendChosen(
            s.run_id, plan, confidence, source, reason, remaining, switch_cost, low, high, trigger=trigger
        )
        yield from s.strategy.after_switch(s.run_id, s.trainer)

    def can_fall_back(self) -> bool:
        """Whether a failed step may continue on the CPU from the last good state (device plans, and
        plans whose batches DataLoader workers load: the fallback loads them in the process)."""
        s = self.s
        return (
            s.strategy.can_fall_back and s.plan is not None and not s.plan.is_last_resort and self.last_good is not None
        )

    def fall_back(self, reason: str, load: Any) -> Iterator[ev.Event]:
        """Continue on the CPU from the last good state and say why. The live tensors are not
        trusted (a step may have died half way through the optimizer update), so the snapshot taken
        when the device plan began, or at the last epoch end, is restored; the steps since are redone."""
        s = self.s
        snap = self.last_good
        assert snap is not None and s.trainer is not None
        s.rt.fallback_reason = reason
        s.trainer.restore_on_cpu(snap.state)
        del s.rt.epoch_records[snap.epoch :]
        s.position = (snap.epoch, snap.step, snap.totals.copy())
        where = f"epoch {snap.epoch + 1}, step {snap.step}"
        yield ev.AgentStepped(
            s.run_id,
            "act",
            f"{reason}; restoring the last good state ({where}) and continuing on the CPU",
            None,
            {"fallback": reason},
        )
        cpu = fallback_plan(s.config, s.backend_of("cpu"), s.logical_cpus, s.predictions)
        yield from self.switch(cpu, "fallback", f"{reason}; continuing on the CPU from {where}", None, load)
