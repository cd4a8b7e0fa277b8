"""The Agent panel on its own: a growing trace costs no screen layout, wraps under its text, keeps
the last MAX_ENTRIES and leaves a reader who scrolled up where they were."""
from __future__ import annotations

from textual.app import App, ComposeResult

from trainpilot_tui.app.trace import TraceEntry
from trainpilot_tui.app.widgets.agent_panel import MAX_ENTRIES, PHASE_WIDTH, AgentPanel


class PanelApp(App[None]):
    def compose(self) -> ComposeResult:
        yield AgentPanel(id="agent")


def entry(i: int, text: str = "") -> TraceEntry:
    return TraceEntry("think", text or f"entry {i}", "decision" if i % 2 else "think")


def visible_text(panel: AgentPanel) -> list[str]:
    return [panel.render_line(y).text for y in range(panel.scrollable_content_region.height)]


async def test_the_trace_is_one_widget_however_long_it_grows() -> None:
    # It was one widget per entry, up to 500: each batch then cost a mount, and every layout of the
    # screen (each epoch's figures) arranged them all, taken from the training the app shows.
    app = PanelApp()
    async with app.run_test(size=(80, 24)) as pilot:
        panel = app.query_one(AgentPanel)
        widgets = len(list(app.screen.walk_children()))
        for batch in range(5):
            panel.add([entry(batch * 40 + i) for i in range(40)])
            await pilot.pause()
        assert len(list(app.screen.walk_children())) == widgets and not panel.children
        assert len(panel.entries) == 200 and panel.virtual_size.height == 200
        assert panel.scroll_y == panel.max_scroll_y > 0
        assert visible_text(panel)[-1].startswith(f"{'think':<{PHASE_WIDTH}}entry 199")


async def test_a_long_entry_wraps_under_its_text_and_rewraps_when_the_panel_narrows() -> None:
    app = PanelApp()
    text = " ".join(f"word{i}" for i in range(40))
    async with app.run_test(size=(100, 24)) as pilot:
        panel = app.query_one(AgentPanel)
        panel.add([entry(0, text)])
        await pilot.pause()
        wide = [line for line in visible_text(panel) if line.strip()]
        assert wide[0].startswith("think   word0 ") and all(line.startswith(" " * PHASE_WIDTH + "word") for line in wide[1:])
        await pilot.resize_terminal(60, 24)
        await pilot.pause()
        narrow = [line for line in visible_text(panel) if line.strip()]
        assert len(narrow) > len(wide)
        assert " ".join(" ".join(line.split()) for line in narrow).replace("think ", "", 1) == text
        assert panel.virtual_size.height == len(narrow)


async def test_the_trace_keeps_the_last_entries_and_a_reader_scrolled_up_keeps_their_line() -> None:
    app = PanelApp()
    async with app.run_test(size=(80, 24)) as pilot:
        panel = app.query_one(AgentPanel)
        panel.add([entry(i) for i in range(MAX_ENTRIES)])
        await pilot.pause()
        assert panel.following and panel.scroll_y == panel.max_scroll_y
        panel.scroll_to(y=100, animate=False)
        await pilot.pause()
        assert not panel.following
        top = visible_text(panel)[0]
        assert "entry 100" in top
        panel.add([entry(MAX_ENTRIES + i) for i in range(10)])
        await pilot.pause()
        assert len(panel.entries) == MAX_ENTRIES and panel.entries[0].text == "entry 10"
        assert panel.virtual_size.height == MAX_ENTRIES
        assert panel.scroll_y == 90 and visible_text(panel)[0] == top
        panel.scroll_end(animate=False)
        await pilot.pause()
        assert panel.following
        panel.add([entry(999)])
        await pilot.pause()
        assert visible_text(panel)[-1].strip().endswith("entry 999")
        panel.clear()
        await pilot.pause()
        assert panel.entries == [] and panel.virtual_size.height == 0
