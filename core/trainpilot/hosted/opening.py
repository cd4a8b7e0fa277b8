"""The agent's decision as a host's log takes it: the compact opening `trainpilot headless run` prints
(trainpilot_tui/cli/plan_table.py, decision first), in plain text, from the same core-side summary
(agent/plan_summary.py). A Trainer's log history and a logger's text take plain strings, and the
core draws no rich markup: the decision and its reasons, one table of the timed plans, what they
share said once, and the plans that cannot run named in one line. The per-plan long lines of the
agent's trace stay behind the callbacks' `verbose=True`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from trainpilot.agent.plan_summary import PlanSummary, Row, plans_named
from trainpilot.energy.reading import EST, joules_text
from trainpilot.units import seconds_range

MAX_ROWS = 8  # as the CLI's table: the slower rest is counted in one line
MAX_LINE = 160  # as the CLI's compact trace: a log line a person reads whole
CHOSEN = "▸"


def clipped(text: str, limit: int = MAX_LINE) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _energy(row: Row, all_estimated: bool) -> str:
    if row.energy_j is None:
        return "-"
    return joules_text(row.energy_j) + (f" {EST}" if row.energy_estimated and not all_estimated else "")


def table_lines(summary: PlanSummary) -> list[str]:
    """The timed plans, sorted by the objective, the chosen one marked: one line each, columns aligned."""
    rows = summary.rows[:MAX_ROWS]
    if not rows:
        return []
    all_estimated = bool(summary.extra.get("all_energy_estimated"))
    columns = [
        ("", [CHOSEN if r.chosen else "" for r in rows]),
        ("plan", [r.short for r in rows]),
        ("predicted (80 %)", [seconds_range(r.predicted_s, r.low_s, r.high_s) for r in rows]),
        ("energy (est.)" if all_estimated else "energy", [_energy(r, all_estimated) for r in rows]),
        ("what sets it apart", ["; ".join(n for n in (r.note, r.basis) if n) for r in rows]),
    ]
    widths = [max(len(header), *(len(c) for c in cells)) for header, cells in columns[:-1]]

    def line(cells: Sequence[str]) -> str:
        return clipped(" ".join(c.ljust(w) for c, w in zip(cells, widths, strict=False)) + " " + cells[-1]).rstrip()

    out = [line([header for header, _ in columns])]
    out += [line([cells[i] for _, cells in columns]) for i in range(len(rows))]
    return out


def opening_lines(summary: PlanSummary | dict[str, Any], *, verbose_hint: str = "verbose=True") -> list[str]:
    """The compact opening: the decision and its reasons, the table, what every plan shares, and
    the plans that cannot run (their reasons: `verbose_hint`, or `trainpilot headless plan`)."""
    if isinstance(summary, dict):
        summary = PlanSummary.from_dict(summary)
    out = [clipped(f"decision: {summary.decision}")]
    out += [clipped(f"  · {reason}") for reason in summary.reasons]
    out += table_lines(summary)
    hidden = len(summary.rows) - MAX_ROWS
    if hidden > 0:
        out.append(f"+ {hidden} more plans, predicted slower ({verbose_hint} lists every plan)")
    if summary.shared:
        out.append(clipped(" · ".join(summary.shared)))
    if summary.excluded:
        names = ", ".join(plans_named(group.plans) for group in summary.excluded)
        out.append(clipped(f"n/a here: {names} (why: {verbose_hint}, or trainpilot headless plan)"))
    return out
