"""The figures the app's panels show, at a panel's width: the compact forms of the one formatting
module (trainpilot/units.py), under the names the widgets use, and a plan by its short label."""
from __future__ import annotations

from trainpilot.plans import Plan
from trainpilot.units import bytes_binary as size
from trainpilot.units import fraction
from trainpilot.units import relative_error as error
from trainpilot.units import seconds_compact as seconds
from trainpilot.units import seconds_range_compact as seconds_range

__all__ = ["error", "fraction", "seconds", "seconds_range", "short_label", "size"]


def short_label(plan: Plan | None) -> str:
    """The plan's one short label (Plan.short_label: 'cpu×2 · cl'), '?' for none."""
    return "?" if plan is None else plan.short_label
