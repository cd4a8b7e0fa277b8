"""Accuracy against speed-up of every configuration tried so far, as a points chart drawn in
characters: x is the speed-up, y the validation accuracy; the target speed-up is a vertical rule,
the accuracy threshold a horizontal one, the best configuration a diamond."""
from __future__ import annotations

from textual.content import Content
from textual.reactive import reactive
from textual.widget import Widget

from ..styles import tcss_beside

POINT, BEST = "•", "◆"
Y_LABEL = 6  # "100.0%"-wide column of y-axis labels


def grid_position(value: float, lo: float, hi: float, cells: int) -> int:
    if hi <= lo:
        return 0
    return max(0, min(cells - 1, round((value - lo) / (hi - lo) * (cells - 1))))


class TradeoffChart(Widget):
    DEFAULT_CSS = tcss_beside(__file__)

    points: reactive[tuple[tuple[float, float], ...]] = reactive(tuple)  # (speed-up, accuracy)
    best: reactive[tuple[float, float] | None] = reactive(None)
    target: reactive[float] = reactive(1.5)
    threshold: reactive[float | None] = reactive(None)  # accuracy the search must keep
    label: reactive[str] = reactive("measured")

    def render(self) -> Content:
        head = Content.from_markup(f"[b]accuracy vs {self.label} speed-up[/b] [$text-muted]({len(self.points)} tried)[/]")
        if not self.points:
            return Content("\n").join([head, Content.from_markup("[$text-muted]points appear as episodes finish[/]")])
        width = max(10, self.size.width - Y_LABEL - 1)
        height = max(3, self.size.height - 3)
        xs = [p[0] for p in self.points] + [1.0, self.target]
        ys = [p[1] for p in self.points] + ([self.threshold] if self.threshold is not None else [])
        x_lo, x_hi = min(xs), max(xs) * 1.05
        y_lo, y_hi = min(ys), max(ys)
        if y_hi - y_lo < 0.01:
            y_lo, y_hi = y_lo - 0.005, y_hi + 0.005
        cells = [[(" ", "")] * width for _ in range(height)]
        tx = grid_position(self.target, x_lo, x_hi, width)
        for r in range(height):
            cells[r][tx] = ("│", "$warning")
        if self.threshold is not None:
            ty = height - 1 - grid_position(self.threshold, y_lo, y_hi, height)
            cells[ty] = [("┄", "$warning") if ch == " " else (ch, st) for ch, st in cells[ty]]
        for s, a in self.points:
            cells[height - 1 - grid_position(a, y_lo, y_hi, height)][grid_position(s, x_lo, x_hi, width)] = (POINT, "$secondary")
        if self.best is not None:
            s, a = self.best
            cells[height - 1 - grid_position(a, y_lo, y_hi, height)][grid_position(s, x_lo, x_hi, width)] = (BEST, "bold $success")
        lines = [head]
        for r, row in enumerate(cells):
            label = f"{y_hi:.1%}" if r == 0 else (f"{y_lo:.1%}" if r == height - 1 else "")
            lines.append(Content.assemble((f"{label:>{Y_LABEL}}", "$text-muted"), ("┤", "$text-muted"), *row))
        axis_left, axis_right = f"{x_lo:.2f}x", f"{x_hi:.2f}x"
        gap = max(1, width - len(axis_left) - len(axis_right))
        lines.append(Content.assemble(" " * (Y_LABEL + 1), (axis_left + " " * gap + axis_right, "$text-muted")))
        return Content("\n").join(lines)
