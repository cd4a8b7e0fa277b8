"""Per-epoch results as a table: loss, accuracy, predicted and actual time, how far off, the plan,
and the epoch's energy ("12.3 J est.") once the session meters it.
An epoch that ran on two plans (a user override mid-epoch) gets one indented row per segment.

Below WIDE_TABLE cells it drops the validation and plan columns and names segments briefly, so the
figures that matter fit an 80-column terminal without a horizontal scrollbar.
"""
from __future__ import annotations

from textual import events
from textual.content import Content
from textual.widgets import DataTable

from trainpilot import events as ev
from trainpilot.energy import Energy
from trainpilot.plans import Plan

from .. import format as fmt
from ..styles import tcss_beside

FULL = ("Ep", "Loss", "Acc", "Val", "Pred", "Actual", "Δ", "Plan")
ENERGY = "Energy"  # a last full-width column, only when some epoch has a figure (energy/meter.py)
COMPACT = ("Ep", "Loss", "Acc", "Pred", "Actual", "Δ")
WIDE_TABLE = 64


def _plan(data: object) -> Plan | None:
    return Plan.from_dict(data) if isinstance(data, dict) else None


def short_label(plan: Plan | None) -> str:
    """'cpu 2t', 'cuda': a plan in six cells."""
    if plan is None:
        return "?"
    return f"{plan.backend} {plan.threads}t" if plan.threads else plan.backend


def run_totals(epochs: tuple[ev.EpochTimed, ...]) -> tuple[float | None, float]:
    """(predicted, actual) seconds over the epochs done; predicted is None if any epoch had none."""
    known = [e.predicted_s for e in epochs]
    predicted = sum(p for p in known if p is not None) if known and all(p is not None for p in known) else None
    return predicted, sum(e.actual_s for e in epochs)


def has_energy(epochs: tuple[ev.EpochTimed, ...]) -> bool:
    return any(getattr(e, "energy_j", None) is not None for e in epochs)


def _energy(joules: float | None, source: str | None) -> str:
    return Energy.recorded(joules, source).text if joules is not None else "–"


def epoch_rows(epochs: tuple[ev.EpochTimed, ...], compact: bool = False) -> list[tuple[object, ...]]:
    rows = _rows(epochs, compact)
    if compact or not has_energy(epochs):
        return rows
    # One more cell per row: the epoch's joules on its row, the run's sum on the totals row.
    energies = []
    for e in epochs:
        energies.append(_energy(e.energy_j, e.energy_source))
        energies.extend([""] * (len(e.segments) if len(e.segments) > 1 else 0))
    known = [e.energy_j for e in epochs]
    total = _energy(sum(known), epochs[-1].energy_source) if all(j is not None for j in known) else "–"  # type: ignore[arg-type]
    energies.append(Content.styled(total, "bold"))
    return [(*row, cell) for row, cell in zip(rows, energies)]


def _rows(epochs: tuple[ev.EpochTimed, ...], compact: bool) -> list[tuple[object, ...]]:
    rows: list[tuple[object, ...]] = []
    for e in epochs:
        predicted = fmt.seconds(e.predicted_s) if compact else fmt.seconds_range(e.predicted_s, e.predicted_low_s, e.predicted_high_s)
        timing = (predicted, fmt.seconds(e.actual_s), fmt.error(e.predicted_s, e.actual_s))
        if compact:
            rows.append((str(e.epoch), f"{e.loss:.3f}", fmt.fraction(e.accuracy), *timing))
        else:
            rows.append((str(e.epoch), f"{e.loss:.3f}", fmt.fraction(e.accuracy), fmt.fraction(e.val_accuracy), *timing, e.plan.label))
        if len(e.segments) > 1:
            for seg in e.segments:
                pred, act = seg.get("predicted_s"), float(seg.get("actual_s", 0.0))
                seg_timing = (fmt.seconds(pred), fmt.seconds(act), fmt.error(pred, act))
                plan = _plan(seg.get("plan"))
                # plain text: the table's own styles colour its cells
                if compact:
                    rows.append(("↳", short_label(plan), "", *seg_timing))
                else:
                    rows.append(("", "", "", "", *seg_timing, f"↳ {plan.label if plan else '?'}"))
    if epochs:
        predicted, actual = run_totals(epochs)
        blanks = ("",) * (2 if compact else 3)
        tail = () if compact else ("",)
        cells = ("run", *blanks, fmt.seconds(predicted), fmt.seconds(actual), fmt.error(predicted, actual), *tail)
        rows.append(tuple(Content.styled(str(v), "bold") for v in cells))
    return rows


class EpochTable(DataTable):
    DEFAULT_CSS = tcss_beside(__file__)

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id, cursor_type="none", zebra_stripes=False)
        self.epochs: tuple[ev.EpochTimed, ...] = ()
        self.compact: bool | None = None
        self.with_energy = False

    def show(self, epochs: tuple[ev.EpochTimed, ...]) -> None:
        self.epochs = epochs
        self._rebuild()

    def on_resize(self, event: events.Resize) -> None:
        if (event.size.width < WIDE_TABLE) != self.compact:
            self._rebuild()

    def _rebuild(self) -> None:
        compact = self.size.width < WIDE_TABLE
        energy = not compact and has_energy(self.epochs)
        if compact != self.compact or energy != self.with_energy:
            self.compact, self.with_energy = compact, energy
            self.clear(columns=True)
            for label in COMPACT if compact else FULL + ((ENERGY,) if energy else ()):
                self.add_column(label, width=3 if label == "Ep" else None)
        else:
            self.clear()
        for row in epoch_rows(self.epochs, compact):
            self.add_row(*row)
