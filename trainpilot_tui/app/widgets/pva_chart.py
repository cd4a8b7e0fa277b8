"""Predicted vs actual time as a compact chart: one row per epoch and one for the run.

Each row is a pair of bars in one line of half-blocks: the upper half is the prediction, the lower
half the actual time. When the user moved the run to another plan mid-epoch, the actual bar is cut
into its segments, in alternating colours, so both parts of the epoch stay visible.
"""
from __future__ import annotations

from textual.content import Content
from textual.geometry import Size
from textual.reactive import reactive
from textual.widget import Widget

from trainpilot import events as ev

from .. import format as fmt
from ..styles import tcss_beside
from .epoch_table import run_totals

PREDICTED = "$secondary"
SEGMENTS = ("$primary", "$accent")


def _cells(value: float, scale: float, width: int) -> int:
    return 0 if scale <= 0 or value <= 0 else max(1, round(value / scale * width))


def dual_bar(predicted: float | None, segments: list[float], scale: float, width: int) -> Content:
    """`width` cells: the top half fills to `predicted`, the bottom half to sum(segments), the
    bottom half changing colour at each segment boundary."""
    pred_cells = _cells(predicted or 0.0, scale, width)
    bounds, total = [], 0.0
    for seconds in segments:
        total += seconds
        bounds.append(_cells(total, scale, width))
    parts: list[tuple[str, str]] = []
    for i in range(width):
        segment = next((k for k, b in enumerate(bounds) if i < b), None)
        top = i < pred_cells
        if top and segment is not None:
            parts.append(("▀", f"{PREDICTED} on {SEGMENTS[segment % 2]}"))
        elif top:
            parts.append(("▀", PREDICTED))
        elif segment is not None:
            parts.append(("▄", SEGMENTS[segment % 2]))
        else:
            parts.append((" ", ""))
    return Content.assemble(*parts)


def segment_seconds(epoch: ev.EpochTimed) -> list[float]:
    return [float(s.get("actual_s", 0.0)) for s in epoch.segments] or [epoch.actual_s]


def run_segments(epochs: tuple[ev.EpochTimed, ...]) -> list[float]:
    """The run's actual time cut where the plan changed (not at every epoch boundary)."""
    pieces: list[tuple[object, float]] = []
    for e in epochs:
        for seg in e.segments or ({"plan": e.plan.to_dict(), "actual_s": e.actual_s},):
            plan, seconds = seg.get("plan"), float(seg.get("actual_s", 0.0))
            if pieces and pieces[-1][0] == plan:
                pieces[-1] = (plan, pieces[-1][1] + seconds)
            else:
                pieces.append((plan, seconds))
    return [seconds for _, seconds in pieces]


class PvaChart(Widget):
    DEFAULT_CSS = tcss_beside(__file__)

    epochs: reactive[tuple[ev.EpochTimed, ...]] = reactive(tuple, layout=True)

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        if not self.epochs:
            return 1
        return len(self.epochs) + 2 + (1 if len(run_segments(self.epochs)) > 1 or any(len(e.segments) > 1 for e in self.epochs) else 0)

    def render(self) -> Content:
        if not self.epochs:
            return Content.from_markup("[$text-muted]predicted vs actual: after the first epoch[/]")
        rows = [(f"{e.epoch}", e.predicted_s, segment_seconds(e)) for e in self.epochs]
        run_predicted, _ = run_totals(self.epochs)
        run_actual = run_segments(self.epochs)
        label_width = max(3, max(len(r[0]) for r in rows))
        numbers = [f" {fmt.seconds(p)}/{fmt.seconds(sum(a))}" for _, p, a in rows] + [f" {fmt.seconds(run_predicted)}/{fmt.seconds(sum(run_actual))}"]
        number_width = max(len(n) for n in numbers)
        bar_width = max(4, self.size.width - label_width - 1 - number_width)
        scale = max(max((p or 0.0) for _, p, _ in rows), max(sum(a) for _, _, a in rows))
        lines = []
        for (label, predicted, segments), numbers_text in zip(rows, numbers):
            lines.append(Content.assemble((f"{label:>{label_width}} ", "$text-muted"), dual_bar(predicted, segments, scale, bar_width), numbers_text))
        run_scale = max(run_predicted or 0.0, sum(run_actual))
        lines.append(Content.assemble((f"{'run':>{label_width}} ", "bold"), dual_bar(run_predicted, run_actual, run_scale, bar_width), (numbers[-1], "bold")))
        split = len(run_actual) > 1 or any(len(e.segments) > 1 for e in self.epochs)
        pad = (" " * (label_width + 1), "")
        lines.append(Content.assemble(pad, ("▀", PREDICTED), " predicted  ", ("▄", SEGMENTS[0]), " actual"))
        if split:
            lines.append(Content.assemble(pad, ("▄", SEGMENTS[0]), ("▄", SEGMENTS[1]), (" colour change = plan switch", "$text-muted")))
        return Content("\n").join(lines)
