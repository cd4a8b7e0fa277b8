"""Each plan's step time as measured on this machine for this very workload, by the load it met:
what the closed loop decides a move on before it trusts a prediction.

Two sources, both measurements: the run's own steps (a plan's settled pace, a near-tie trial's
blocks), and the history's rows of earlier runs of the same workload footprint on this machine
(the load phases a moved run left behind, and whole runs on one plan). A prediction, even one
corrected by the run's bias, only fills in where neither has met the plan under the load now.
"""

from __future__ import annotations

import statistics
from typing import Any

from trainpilot.plans import Plan

# Rows a plan's pace can be read from: a load phase is steps only; a whole run on one plan adds
# its warm-up, which a multi-epoch run spreads thin. A run that moved timed several plans at once.
USABLE_STATUSES = ("phase", "success")


def load_key(others: float) -> int:
    """The whole cores other processes use: loads alike enough to share a measured pace."""
    return max(0, round(others))


class MeasuredPaces:
    """Measured step times, by (plan, load_key); the run's own beat the history's."""

    def __init__(self, history: dict[tuple[Plan, int], float] | None = None):
        self.history = dict(history or {})
        self.run: dict[tuple[Plan, int], float] = {}

    def note(self, plan: Plan, others: float, step_s: float) -> None:
        self.run[(plan, load_key(others))] = step_s

    def get(self, plan: Plan, others: float) -> tuple[float, str] | None:
        """(step time, where it was measured) or None where the plan never met such a load."""
        key = (plan, load_key(others))
        if key in self.run:
            return self.run[key], "this run"
        if key in self.history:
            return self.history[key], "earlier runs"
        return None

    def run_paces(self, others: float) -> dict[Plan, float]:
        """Every plan this run measured under a load like `others`."""
        key = load_key(others)
        return {plan: step for (plan, k), step in self.run.items() if k == key}


def history_paces(history: Any, machine_id: str, footprint: str) -> dict[tuple[Plan, int], float]:
    """The median step time of each plan under each whole-core load, from the history's rows of
    this footprint on this machine (an empty dict when there is no history to read)."""
    if history is None:
        return {}
    try:
        records = history.records(machine_id)
    except Exception:  # noqa: BLE001 - an unreadable history leaves the run to its own measurements
        return {}
    steps: dict[tuple[Plan, int], list[float]] = {}
    for rec in records:
        if rec.footprint != footprint or rec.status not in USABLE_STATUSES or not rec.learn:
            continue
        per_epoch = rec.profile.get("steps_per_epoch")
        if not per_epoch or rec.epochs_done < 1 or rec.actual_s <= 0:
            continue
        others = rec.busy_cores - (rec.ui_cores or 0.0)
        steps.setdefault((rec.plan, load_key(others)), []).append(rec.actual_s / (rec.epochs_done * per_epoch))
    return {key: statistics.median(values) for key, values in steps.items()}
