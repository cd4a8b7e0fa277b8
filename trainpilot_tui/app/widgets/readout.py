"""A few lines of text that change often (a figure, a status line) without reflowing the screen.

`Static.update` asks for a new layout of the whole screen on every call, because the new text may
need another size. Figures that tick several times a second do not: this widget repaints itself
only, and asks for a layout only when its number of lines changes. That keeps the app's main
thread, and so the GIL, free for the training thread (see benchmarks/tui_overhead.py).
"""
from __future__ import annotations

from textual.content import Content
from textual.geometry import Size
from textual.widget import Widget


class Readout(Widget):
    DEFAULT_CSS = "Readout { height: auto; width: 1fr; }"

    def __init__(self, content: Content | str = "", *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self._content = Content(content) if isinstance(content, str) else content

    @property
    def content(self) -> Content:
        return self._content

    def update(self, content: Content | str) -> None:
        new = Content(content) if isinstance(content, str) else content
        if new.is_same(self._content):
            return
        relayout = new.plain.count("\n") != self._content.plain.count("\n")
        self._content = new
        self.refresh(layout=relayout)

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        return self._content.plain.count("\n") + 1

    def render(self) -> Content:
        return self._content
