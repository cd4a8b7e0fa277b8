"""The new-run dialog: pick the model and the dataset (and epochs); the agent then observes and
plans again from scratch. Inputs are checked here so a typo is one line under the field, not a
failed run."""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label, Select

from trainpilot.energy.objective import OBJECTIVES
from trainpilot.run.session import SessionConfig


def zoo_models() -> tuple[str, ...]:
    # The zoo lives beside the model classes (torch); by the time a user opens this dialog the
    # session has imported torch already, so this is a dictionary lookup.
    from trainpilot.job.model_names import ZOO

    return tuple(ZOO)


def model_name(config: SessionConfig) -> str:
    """The model as the picker lists it: a zoo name, path.py:Class, or the run's job (file.py:make_job)."""
    if config.job:
        return config.job
    return config.model if isinstance(config.model, str) else str(config.model.get("name", "small_cnn"))


def check_choice(model: str, dataset: str, epochs: str, base: SessionConfig, objective: str | None = None) -> SessionConfig | str:
    """The new config, or a one-line problem. Choosing the run's job (`base.job`) keeps it; any other
    model leaves the job for that model on the dataset."""
    dataset = dataset.strip()
    job = base.job if base.job and model == base.job else None
    if job and dataset and dataset != "demo":
        return "a job brings its own data: leave the dataset empty, or pick a model"
    if dataset and dataset != "demo" and not Path(dataset).expanduser().exists():
        return f"{dataset}: no such file or directory"
    try:
        count = int(epochs)
    except ValueError:
        return f"epochs must be a whole number, got '{epochs}'"
    if count < 1:
        return "epochs must be at least 1"
    return replace(base, model=model, dataset=None if job else dataset or None, epochs=count, resume=None, run_id=None, objective=objective or base.objective,
                   job=job)


class RunPicker(ModalScreen[SessionConfig | None]):
    CSS_PATH = "run_picker.tcss"
    BINDINGS = [Binding("escape", "cancel", "Cancel")]

    def __init__(self, config: SessionConfig) -> None:
        super().__init__()
        self.config = config

    def compose(self) -> ComposeResult:
        current = model_name(self.config)
        models = list(zoo_models())
        if current not in models:
            models.append(current)
        with Vertical(id="dialog"):
            yield Label("New run", id="title")
            yield Label("Model", classes="field")
            choices = [(f"{m} (job)" if m == self.config.job else m, m) for m in models]
            yield Select(choices, value=current, allow_blank=False, id="model")
            yield Label("Dataset (a path; empty: the bundled demo set)", classes="field")
            yield Input(value=self.config.dataset or "", placeholder="demo", id="dataset")
            yield Label("Epochs", classes="field")
            yield Input(value=str(self.config.epochs), type="integer", id="epochs")
            yield Label("Objective: what the agent minimises (energy is estimated, est., where nothing measures it)", classes="field")
            yield Select([(name, name) for name in OBJECTIVES], value=self.config.objective, allow_blank=False, id="objective")
            yield Label("", id="problem")
            with Horizontal(id="buttons"):
                yield Button("Cancel", id="cancel")
                yield Button("Start", variant="primary", id="start")

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "start":
            self._submit()
        else:
            self.dismiss(None)

    def on_input_submitted(self) -> None:
        self._submit()

    def _submit(self) -> None:
        model = str(self.query_one("#model", Select).value)
        result = check_choice(model, self.query_one("#dataset", Input).value, self.query_one("#epochs", Input).value, self.config,
                              str(self.query_one("#objective", Select).value))
        if isinstance(result, str):
            self.query_one("#problem", Label).update(result)
            return
        self.dismiss(result)

    def action_cancel(self) -> None:
        self.dismiss(None)
