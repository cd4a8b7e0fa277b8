"""Quitting mid-run asks first: the run stops at the next step boundary and saves a checkpoint,
so `--resume RUN_ID` can continue it later."""
from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Label


class ConfirmQuit(ModalScreen[bool]):
    CSS_PATH = "confirm_quit.tcss"
    BINDINGS = [
        Binding("y", "answer(True)", "Checkpoint and quit"),
        Binding("n,escape", "answer(False)", "Keep training"),
    ]

    def __init__(self, run_id: str | None) -> None:
        super().__init__()
        self.run_id = run_id

    def compose(self) -> ComposeResult:
        resume = f" Resume it later with --resume {self.run_id}." if self.run_id else ""
        with Vertical(id="dialog"):
            yield Label("Training is in progress", id="title")
            yield Label(f"Quit now? The run stops after the current step and saves a checkpoint.{resume}", id="question")
            with Horizontal(id="buttons"):
                yield Button("Checkpoint and quit (y)", variant="warning", id="yes")
                yield Button("Keep training (n)", variant="primary", id="no")

    def on_mount(self) -> None:
        self.query_one("#no", Button).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "yes")

    def action_answer(self, answer: bool) -> None:
        self.dismiss(answer)
