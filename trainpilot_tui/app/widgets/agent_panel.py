"""The Agent panel: the observe -> think -> act trace, newest last, scrollable.

Each entry is one small widget with its kind as a CSS class, so the .tcss decides how a decision, a
user override or a refusal stands out; long entries wrap under their text, not under the phase
label. The panel follows the newest entry while the user is at the bottom and stays put once they
scroll up; it keeps the last MAX_ENTRIES so a long session cannot grow without bound.
"""
from __future__ import annotations

from textual.containers import VerticalScroll
from textual.content import Content
from textual.geometry import Size
from textual.widget import Widget

from ..styles import tcss_beside
from ..trace import TraceEntry

MAX_ENTRIES = 500
PHASE_WIDTH = 8


class TraceLine(Widget):
    def __init__(self, entry: TraceEntry) -> None:
        super().__init__(classes=f"trace-{entry.kind}")
        self.entry = entry
        self._wrapped: tuple[int, list[Content]] = (-1, [])

    def _lines(self, width: int) -> list[Content]:
        if self._wrapped[0] != width:
            label = Content.styled(f"{self.entry.phase:<{PHASE_WIDTH}}", "bold $secondary")
            body = Content(self.entry.text).wrap(max(8, width - PHASE_WIDTH)) or [Content("")]
            indent = Content(" " * PHASE_WIDTH)
            self._wrapped = (width, [Content.assemble(label, body[0]), *(Content.assemble(indent, b) for b in body[1:])])
        return self._wrapped[1]

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        return len(self._lines(width))

    def render(self) -> Content:
        return Content("\n").join(self._lines(self.size.width))


class AgentPanel(VerticalScroll):
    DEFAULT_CSS = tcss_beside(__file__)
    SCOPED_CSS = False

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.following = True  # show the newest entry; false once the user scrolls up

    def watch_scroll_y(self, old_value: float, new_value: float) -> None:
        super().watch_scroll_y(old_value, new_value)
        self.following = new_value >= self.max_scroll_y - 1

    def on_resize(self) -> None:
        # a narrower panel wraps more lines: stay on the newest if that is where the user was
        if self.following:
            self.call_after_refresh(self.scroll_end, animate=False)

    def on_mount(self) -> None:
        self.border_title = "Agent: observe → think → act"

    def add(self, entries: list[TraceEntry]) -> None:
        if not entries:
            return
        following = self.following
        self.mount_all(TraceLine(e) for e in entries)
        if following:
            self.scroll_end(animate=False)
        excess = len(self.children) - MAX_ENTRIES
        if excess > 0:
            for child in list(self.children)[:excess]:
                child.remove()

    def clear(self) -> None:
        self.remove_children()

    @property
    def entries(self) -> list[TraceEntry]:
        return [line.entry for line in self.query(TraceLine)]

    @property
    def text(self) -> str:
        """The trace as plain text, one entry a line (tests and screen readers)."""
        return "\n".join(f"{e.phase} {e.text}" for e in self.entries)
