"""Per-epoch results as a table: loss, accuracy, predicted and actual time, how far off, the plan,
and the epoch's energy ("12.3 J est.") once the session meters it.
An epoch that ran on two plans (a user override mid-epoch) gets one indented row per segment.

Accuracy is the zoo's metric; a user's job shows its own metric under its name, or, with no metric
(its epochs carry none), the validation loss in one "Val loss" column instead.

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
VAL_LOSS = "Val loss"
ACCURACY = "accuracy"
METRIC_CELLS = 6  # a metric's name as a column header is cut to this many cells


def has_metric(epochs: tuple[ev.EpochTimed, ...]) -> bool:
    """False for a job without a metric: every epoch's figure is None (an empty run: True, so the
    table starts with the zoo's columns)."""
    return not epochs or any(e.accuracy is not None for e in epochs)


def columns(compact: bool, metric: str | None = ACCURACY) -> tuple[str, ...]:
    """The table's headers: `metric` None for a job without one (the validation loss instead)."""
    base = COMPACT if compact else FULL
    if metric is None:
        return ("Ep", "Loss", VAL_LOSS, *base[3 if compact else 4 :])  # the metric's columns give way
    if metric == ACCURACY:
        return base
    name = metric[:METRIC_CELLS]
    return tuple({"Acc": name, "Val": f"Val {name}"[: METRIC_CELLS + 4]}.get(h, h) for h in base)


def _figure(value: float | None, metric: str) -> str:
    if value is None:
        return fmt.fraction(None)
    return fmt.fraction(value) if metric == ACCURACY else f"{value:.3g}"


def _figures(e: ev.EpochTimed, compact: bool, metric: str | None) -> tuple[str, ...]:
    """The cells between Loss and the timings: the metric (and on validation), or the validation loss."""
    if metric is None:
        val_loss = e.val_loss
        return (f"{val_loss:.3f}" if val_loss is not None else fmt.fraction(None),)
    if compact:
        return (_figure(e.accuracy, metric),)
    return _figure(e.accuracy, metric), _figure(e.val_accuracy, metric)


def _plan(data: object) -> Plan | None:
    return Plan.from_dict(data) if isinstance(data, dict) else None


def run_totals(epochs: tuple[ev.EpochTimed, ...]) -> tuple[float | None, float]:
    """(predicted, actual) seconds over the epochs done; predicted is None if any epoch had none."""
    known = [e.predicted_s for e in epochs]
    predicted = sum(p for p in known if p is not None) if known and all(p is not None for p in known) else None
    return predicted, sum(e.actual_s for e in epochs)


def has_energy(epochs: tuple[ev.EpochTimed, ...]) -> bool:
    return any(getattr(e, "energy_j", None) is not None for e in epochs)


def _energy(joules: float | None, source: str | None) -> str:
    return Energy.recorded(joules, source).text if joules is not None else "–"


def epoch_rows(epochs: tuple[ev.EpochTimed, ...], compact: bool = False, metric: str = ACCURACY) -> list[tuple[object, ...]]:
    """The table's rows; `metric`: the job's metric's name (a job without one shows by its epochs)."""
    rows = _rows(epochs, compact, metric if has_metric(epochs) else None)
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


def _rows(epochs: tuple[ev.EpochTimed, ...], compact: bool, metric: str | None) -> list[tuple[object, ...]]:
    rows: list[tuple[object, ...]] = []
    gap = ("",) * (1 if compact or metric is None else 2)  # under the figures' columns
    for e in epochs:
        predicted = fmt.seconds(e.predicted_s) if compact else fmt.seconds_range(e.predicted_s, e.predicted_low_s, e.predicted_high_s)
        timing = (predicted, fmt.seconds(e.actual_s), fmt.error(e.predicted_s, e.actual_s))
        figures = _figures(e, compact, metric)
        if compact:
            rows.append((str(e.epoch), f"{e.loss:.3f}", *figures, *timing))
        else:
            rows.append((str(e.epoch), f"{e.loss:.3f}", *figures, *timing, e.plan.short_label))
        if len(e.segments) > 1:
            for seg in e.segments:
                pred, act = seg.get("predicted_s"), float(seg.get("actual_s", 0.0))
                seg_timing = (fmt.seconds(pred), fmt.seconds(act), fmt.error(pred, act))
                plan = _plan(seg.get("plan"))
                # plain text: the table's own styles colour its cells
                if compact:
                    rows.append(("↳", fmt.short_label(plan), *gap, *seg_timing))
                else:
                    rows.append(("", "", *gap, *seg_timing, f"↳ {fmt.short_label(plan)}"))
    if epochs:
        predicted, actual = run_totals(epochs)
        blanks = ("", *gap)
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
        self.metric = ACCURACY  # the job's metric's name (RunPanel sets it when a run starts)
        self.headers: tuple[str, ...] = ()

    def show(self, epochs: tuple[ev.EpochTimed, ...]) -> None:
        self.epochs = epochs
        self._rebuild()

    def on_resize(self, event: events.Resize) -> None:
        if (event.size.width < WIDE_TABLE) != self.compact:
            self._rebuild()

    def _rebuild(self) -> None:
        compact = self.size.width < WIDE_TABLE
        energy = not compact and has_energy(self.epochs)
        headers = columns(compact, self.metric if has_metric(self.epochs) else None) + ((ENERGY,) if energy else ())
        if compact != self.compact or headers != self.headers:
            self.compact, self.headers = compact, headers
            self.clear(columns=True)
            for label in headers:
                self.add_column(label, width=3 if label == "Ep" else None)
        else:
            self.clear()
        for row in epoch_rows(self.epochs, compact, self.metric):
            self.add_row(*row)
