"""A sparkline on an absolute scale.

Textual's Sparkline scales between the data's own minimum and maximum, which makes a flat 50 % CPU
look like a full bar. Utilisation must read honestly, so this one scales from 0 to a fixed
ceiling (100 for percentages) or to the data's maximum (for sizes). It draws the newest values at
the right edge and uses as many rows as it is given (8 levels per row).
"""
from __future__ import annotations

from textual.content import Content
from textual.reactive import reactive
from textual.widget import Widget

BLOCKS = " ▁▂▃▄▅▆▇█"


def trend_rows(values: list[float], width: int, height: int, ceiling: float | None) -> list[str]:
    """The sparkline as `height` strings of `width` characters, newest value rightmost."""
    if width <= 0 or height <= 0:
        return []
    shown = values[-width:]
    top = ceiling if ceiling is not None else max(shown, default=0.0)
    levels = height * 8
    filled = [0 if top <= 0 else max(0, min(levels, round(v / top * levels))) for v in shown]
    # a non-zero value always shows at least one eighth, so "busy a little" never reads as idle
    filled = [max(f, 1) if v > 0 and top > 0 else f for f, v in zip(filled, shown)]
    pad = width - len(filled)
    rows = []
    for row in range(height):  # top row first
        base = (height - 1 - row) * 8
        cells = [BLOCKS[max(0, min(8, f - base))] for f in filled]
        rows.append(" " * pad + "".join(cells))
    return rows


class Trend(Widget):
    DEFAULT_CSS = "Trend { height: 1; width: 1fr; }"

    values: reactive[tuple[float, ...]] = reactive(tuple)

    def __init__(self, ceiling: float | None = None, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.ceiling = ceiling

    def render(self) -> Content:
        rows = trend_rows(list(self.values), self.size.width, self.size.height, self.ceiling)
        return Content("\n".join(rows))
