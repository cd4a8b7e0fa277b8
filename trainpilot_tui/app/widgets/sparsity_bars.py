"""Per-layer sparsity as horizontal bars: one row per prunable layer, the share of its channels
removed (and kept / total channels)."""
from __future__ import annotations

from dataclasses import dataclass

from textual.content import Content
from textual.geometry import Size
from textual.reactive import reactive
from textual.widget import Widget

from ..styles import tcss_beside


@dataclass(frozen=True)
class LayerBar:
    name: str
    kind: str
    channels: int
    kept: int

    @property
    def sparsity(self) -> float:
        return 1.0 - self.kept / self.channels if self.channels else 0.0


def bar(fraction: float, width: int) -> Content:
    filled = max(0, min(width, round(fraction * width)))
    return Content.assemble(("█" * filled, "$primary"), ("░" * (width - filled), "$text-muted"))


class SparsityBars(Widget):
    DEFAULT_CSS = tcss_beside(__file__)

    rows: reactive[tuple[LayerBar, ...]] = reactive(tuple, layout=True)
    title: reactive[str] = reactive("sparsity per layer")

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        return 1 + max(len(self.rows), 1)

    def render(self) -> Content:
        lines = [Content.from_markup(f"[b]{self.title}[/b]")]
        if not self.rows:
            lines.append(Content.from_markup("[$text-muted]after the first episode[/]"))
            return Content("\n").join(lines)
        label = max(len(r.name) for r in self.rows)
        numbers = [f" {r.sparsity:>4.0%} {r.kept}/{r.channels}" for r in self.rows]
        width = max(4, self.size.width - label - 1 - max(len(n) for n in numbers))
        for row, text in zip(self.rows, numbers):
            lines.append(Content.assemble((f"{row.name:<{label}} ", "$text-muted"), bar(row.sparsity, width), text))
        return Content("\n").join(lines)
