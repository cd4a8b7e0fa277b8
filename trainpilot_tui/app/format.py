"""The figures the app's panels show, at a panel's width: the compact forms of the one formatting
module (trainpilot/units.py), under the names the widgets use, and a plan in a few cells."""
from __future__ import annotations

from trainpilot.plans import Plan
from trainpilot.units import bytes_binary as size
from trainpilot.units import fraction
from trainpilot.units import relative_error as error
from trainpilot.units import seconds_compact as seconds
from trainpilot.units import seconds_range_compact as seconds_range

__all__ = ["error", "fraction", "seconds", "seconds_range", "short_label", "size"]


def short_label(plan: Plan | None) -> str:
    """'cpu 2t', 'cuda', 'cpu 2t cl bf16': a plan in a few cells (cl: channels_last), so the two
    segments of a layout or precision switch read apart, and a plan fits a narrow panel's line."""
    if plan is None:
        return "?"
    base = f"{plan.backend} {plan.threads}t" if plan.threads else plan.backend
    marks = ("cl" if plan.memory_format else "", plan.precision or "")
    return " ".join([base, *(m for m in marks if m)])
