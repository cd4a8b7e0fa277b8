"""The Agent panel: the observe -> think -> act trace, newest last, scrollable.

One line-API widget draws the whole trace. It used to be one small widget per entry in a scrolling
container; each batch of entries then mounted widgets and scrolled the container, and each mount
or scroll cost Textual a layout of the whole screen and a repaint of every panel (more as the
trace grew towards its 500 widgets; measured: docs/measurements.md#cited-in-the-code-the-app),
taken from the training the app shows.
Here adding entries changes this widget's virtual size and repaints its own lines, nothing else.

Each entry's kind picks a component class, so the .tcss decides how a decision, a user override
or a refusal stands out; long entries wrap under their text, not under the phase label. The panel
follows the newest entry while the user is at the bottom and stays put once they scroll up; it
keeps the last MAX_ENTRIES so a long session cannot grow without bound.
"""
from __future__ import annotations

from textual.content import Content
from textual.geometry import Size
from textual.scroll_view import ScrollView
from textual.selection import Selection
from textual.strip import Strip
from textual.visual import Visual

from ..styles import tcss_beside
from ..trace import KINDS, TraceEntry

MAX_ENTRIES = 500
PHASE_WIDTH = 8


def wrap_entry(entry: TraceEntry, width: int) -> list[Content]:
    """The entry's lines at `width` cells: the phase in its column, the text wrapped beside it."""
    label = Content.styled(f"{entry.phase:<{PHASE_WIDTH}}", "bold $secondary")
    body = Content(entry.text).wrap(max(8, width - PHASE_WIDTH)) or [Content("")]
    indent = Content(" " * PHASE_WIDTH)
    return [Content.assemble(label, body[0]), *(Content.assemble(indent, line) for line in body[1:])]


class AgentPanel(ScrollView, can_focus=True):
    DEFAULT_CSS = tcss_beside(__file__)
    SCOPED_CSS = False
    COMPONENT_CLASSES = {f"trace--{kind}" for kind in KINDS}

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.following = True  # show the newest entry; false once the user scrolls up
        self._entries: list[TraceEntry] = []
        self._line_counts: list[int] = []  # lines of each entry at the wrap width
        self._lines: list[tuple[str, Content]] = []  # (kind, line) of every entry in order
        self._strips: dict[int, Strip] = {}  # rendered lines by index, until width, theme or selection change
        self._width = 0  # the wrap width of _lines; 0 before the first layout

    # ---------------------------------------------------------------- entries

    def add(self, entries: list[TraceEntry]) -> None:
        if not entries:
            return
        self._entries.extend(entries)
        if self._width:
            for entry in entries:
                self._append_lines(entry)
        self._prune()
        self._resized_content()

    def clear(self) -> None:
        self._entries.clear()
        self._line_counts.clear()
        self._lines.clear()
        self._strips.clear()
        self.following = True
        self._resized_content()

    @property
    def entries(self) -> list[TraceEntry]:
        return list(self._entries)

    @property
    def text(self) -> str:
        """The trace as plain text, one entry a line (tests and screen readers)."""
        return "\n".join(f"{e.phase} {e.text}" for e in self._entries)

    def _append_lines(self, entry: TraceEntry) -> None:
        lines = wrap_entry(entry, self._width)
        self._line_counts.append(len(lines))
        self._lines.extend((entry.kind, line) for line in lines)

    def _prune(self) -> None:
        excess = len(self._entries) - MAX_ENTRIES
        if excess <= 0:
            return
        del self._entries[:excess]
        dropped = sum(self._line_counts[:excess])
        del self._line_counts[:excess]
        del self._lines[:dropped]
        self._strips = {i - dropped: s for i, s in self._strips.items() if i >= dropped}
        if not self.following:  # keep the lines the user is reading where they are
            self.scroll_to(y=max(0, self.scroll_y - dropped), animate=False, immediate=True)

    def _rewrap(self, width: int) -> None:
        self._width = width
        self._line_counts.clear()
        self._lines.clear()
        self._strips.clear()
        for entry in self._entries:
            self._append_lines(entry)

    def _resized_content(self) -> None:
        """The line count changed: a new virtual size, and the newest line in view if following."""
        following = self.following
        self.virtual_size = Size(self._width, len(self._lines))
        if following:
            self.scroll_end(animate=False)  # after the refresh: the scrollbar may only now appear
        self.following = following
        self.refresh()

    # ---------------------------------------------------------------- Textual hooks

    def on_mount(self) -> None:
        self.border_title = "Agent: observe → think → act"

    def on_resize(self) -> None:
        # Wrapped as if the scrollbar were there: the width must not change when it appears.
        width = self.content_region.width - self.styles.scrollbar_size_vertical
        if width > 0 and width != self._width:  # a narrower panel wraps more lines
            self._rewrap(width)
            self._resized_content()

    def watch_scroll_y(self, old_value: float, new_value: float) -> None:
        super().watch_scroll_y(old_value, new_value)
        self.following = new_value >= self.max_scroll_y - 1

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._strips.clear()  # a theme change recolours every line

    def render_line(self, y: int) -> Strip:
        index = self.scroll_offset.y + y
        width = self.scrollable_content_region.width
        if index >= len(self._lines):
            return Strip.blank(width, self.rich_style)
        strip = self._strips.get(index)
        if strip is None:
            kind, line = self._lines[index]
            span = self.text_selection.get_span(index) if self.text_selection is not None else None
            if span is not None:
                start, end = span
                line = line.stylize(self.screen.get_visual_style("screen--selection"), start, len(line) if end == -1 else end)
            style = self.get_visual_style(f"trace--{kind}") if f"trace--{kind}" in self.COMPONENT_CLASSES else self.visual_style
            strip = Visual.to_strips(self, line, width, 1, style, apply_selection=False, pad=True)[0]
            strip = strip.apply_offsets(0, index)  # where a mouse selection starts and ends
            self._strips[index] = strip
        return strip

    def get_selection(self, selection: Selection) -> tuple[str, str] | None:
        return selection.extract("\n".join(line.plain for _, line in self._lines)), "\n"

    def selection_updated(self, selection: Selection | None) -> None:
        self._strips.clear()
        self.refresh()
