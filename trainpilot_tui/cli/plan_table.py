"""The agent's decision as a person reads it in a terminal: one table of plans, each reason once.

Drawn from the core's summary (trainpilot/agent/plan_summary.py) for `headless plan` and for the
start of `headless run`'s trace. Every row is one line at any width: a wider terminal gets more
columns (where the prediction came from, how far such predictions miss), never more rows; at most
MAX_ROWS plans are listed, the rest counted. What every plan shares, and the plans that cannot
run (one line per reason, with what would lift it), follow the table.
"""
from __future__ import annotations

from typing import Any

from rich.markup import escape

from trainpilot.agent.plan_summary import PlanSummary, Row
from trainpilot.energy.reading import EST, joules_text
from trainpilot.units import seconds_range

MAX_ROWS = 8  # plans listed; the slower rest is counted in one line
WIDE = 110  # from this width on, the source and error columns too
CHOSEN = "▸"


def _energy(row: Row, all_estimated: bool) -> str:
    if row.energy_j is None:
        return "-"
    return joules_text(row.energy_j) + (f" {EST}" if row.energy_estimated and not all_estimated else "")


def plan_table(summary: PlanSummary, width: int) -> Any:
    """A rich Table of the timed plans, sorted by the objective, the chosen one marked."""
    from rich.table import Table
    from rich.text import Text

    wide = width >= WIDE
    all_estimated = bool(summary.extra.get("all_energy_estimated"))
    rows = summary.rows[:MAX_ROWS]
    columns: list[tuple[str, list[str], str]] = [  # (header, cells, justify)
        ("", [f"[bold green]{CHOSEN}[/]" if r.chosen else "" for r in rows], "left"),
        ("plan", [f"[bold]{escape(r.short)}[/]" if r.chosen else escape(r.short) for r in rows], "left"),
        ("predicted (80 %)", [seconds_range(r.predicted_s, r.low_s, r.high_s) for r in rows], "left"),
        ("energy (est.)" if all_estimated else "energy", [_energy(r, all_estimated) for r in rows], "right"),
    ]
    if wide:
        columns.append(("source", [escape(r.basis or r.source) for r in rows], "left"))
        columns.append(("±error", [f"{r.relative_error:.0%}" if r.relative_error is not None else "-" for r in rows], "right"))
    table = Table(box=None, show_edge=False, pad_edge=False, header_style="bold", expand=True)
    for header, cells, justify in columns:  # each as wide as its widest cell: never squeezed
        widest = max([Text.from_markup(c).cell_len for c in cells] + [len(header)])
        table.add_column(header, no_wrap=True, min_width=widest, justify=justify)  # type: ignore[arg-type]
    table.add_column("what sets it apart", no_wrap=True, overflow="ellipsis", ratio=1)
    for index, row in enumerate(rows):
        # narrow: the plan's own facts, else what its prediction rests on; wide: that has its column
        note = row.note if wide else "; ".join(n for n in (row.note, row.basis) if n)
        table.add_row(*(cells[index] for _, cells, _ in columns), f"[dim]{escape(note)}[/]")
    return table


def summary_lines(summary: PlanSummary) -> tuple[list[str], list[str]]:
    """(the decision and its reasons, what every plan shares): rich markup lines."""
    decision = [f"[bold]decision[/]: [bold green]{escape(summary.decision)}[/]"]
    decision += [f"  [dim]·[/] {escape(reason)}" for reason in summary.reasons]
    hidden = len(summary.rows) - MAX_ROWS
    shared = [f"[dim]+ {hidden} more plans, predicted slower (--verbose lists every plan)[/]"] if hidden > 0 else []
    if summary.shared:  # one paragraph: a short fact takes no row of its own
        shared.append("[dim]" + " · ".join(escape(line) for line in summary.shared) + "[/]")
    return decision, shared


def excluded_by_reason(summary: PlanSummary) -> list[str]:
    """The plans that cannot run, one line per reason, with what would lift it."""
    return [f"[dim]n/a[/] {escape(group.text)}" for group in summary.excluded]


def excluded_in_one_line(summary: PlanSummary) -> list[str]:
    """'n/a here: 4 compiled plans, ane, mps, cuda (why: --verbose)': a run's trace names what
    cannot run and leaves the reasons to `headless plan` and --verbose."""
    if not summary.excluded:
        return []
    from trainpilot.agent.plan_summary import plans_named

    names = ", ".join(plans_named(group.plans) for group in summary.excluded)
    return [f"[dim]n/a here: {escape(names)} (why: --verbose, or headless plan)[/]"]


def print_summary(console: Any, summary: PlanSummary, *, decision_first: bool) -> None:
    """The summary on `console`: for `headless plan` the table first; for a run's trace the
    decision first (what a person wants to know as the run starts), then the table, and the plans
    that cannot run named in one line."""
    decision, shared = summary_lines(summary)
    # a run's trace names them; the reasons for exclusions are a command away
    excluded = excluded_in_one_line(summary) if decision_first else excluded_by_reason(summary)
    table = plan_table(summary, console.width)
    if decision_first:
        for line in decision:
            console.print(line)
    console.print(table)
    for line in (*shared, *excluded):
        console.print(line)
    if not decision_first:
        for line in decision:
            console.print(line)
