"""Per-core CPU utilisation as small bars that flow into as many columns as the width allows.

Up to a few dozen cores each gets a labelled bar; beyond what fits in `MAX_ROWS` rows, every core
becomes one vertical block in a strip (a 128-core machine still fits in two lines).
"""
from __future__ import annotations

import math

from textual.content import Content
from textual.geometry import Size
from textual.reactive import reactive
from textual.widget import Widget

EIGHTHS = " ▏▎▍▌▋▊▉█"
LEVELS = " ▁▂▃▄▅▆▇█"
MIN_CELL = 14  # " 0 ▕████▌ ▏ 72%" still reads at this width
MAX_ROWS = 4
HOT = 85.0  # percent: drawn in the warning colour


def _bar(percent: float, width: int) -> str:
    eighths = round(max(0.0, min(100.0, percent)) / 100 * width * 8)
    full, part = divmod(eighths, 8)
    text = "█" * full + (EIGHTHS[part] if part else "")
    return text.ljust(width)


def layout(cores: int, width: int) -> tuple[str, int, int]:
    """("bars", columns, rows) or ("strip", per_row, rows) for this many cores at this width."""
    if cores == 0 or width <= 0:
        return "bars", 1, 0
    columns = max(1, min(cores, width // MIN_CELL))
    rows = math.ceil(cores / columns)
    if rows <= MAX_ROWS:
        return "bars", columns, rows
    per_row = max(1, width - 6)
    return "strip", per_row, math.ceil(cores / per_row)


class CoreBars(Widget):
    DEFAULT_CSS = "CoreBars { height: auto; width: 1fr; }"

    per_core: reactive[tuple[float, ...]] = reactive(tuple)

    def watch_per_core(self, old: tuple[float, ...], new: tuple[float, ...]) -> None:
        # new figures repaint; only a different number of cores can change the height
        if len(old) != len(new):
            self.refresh(layout=True)

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        return max(1, layout(len(self.per_core), width)[2])

    def render(self) -> Content:
        cores = self.per_core
        if not cores:
            return Content.from_markup("[$text-muted]cores: sampling…[/]")
        mode, per_row, rows = layout(len(cores), self.size.width)
        lines: list[Content] = []
        if mode == "strip":
            for r in range(rows):
                chunk = cores[r * per_row : (r + 1) * per_row]
                blocks = "".join(LEVELS[max(1 if v > 0 else 0, round(v / 100 * 8))] for v in chunk)
                lines.append(Content.assemble((f"{r * per_row:>4}  ", "$text-muted"), (blocks, "$accent")))
            return Content("\n").join(lines)
        cell = self.size.width // per_row
        bar_width = max(1, cell - 9)
        label_width = len(str(len(cores) - 1))
        for r in range(rows):
            cells = []
            for index in range(r * per_row, min(len(cores), (r + 1) * per_row)):
                value = cores[index]
                style = "$warning" if value >= HOT else "$accent"
                cells.append(
                    Content.assemble(
                        (f"{index:>{label_width}} ", "$text-muted"),
                        (_bar(value, bar_width), style),
                        (f"{value:>4.0f}%".ljust(cell - bar_width - label_width - 1), ""),
                    )
                )
            lines.append(Content("").join(cells))
        return Content("\n").join(lines)
