"""The `trainpilot` command: a thin Typer layer over the core. Imports torch only inside commands,
so `trainpilot --help` answers at once."""
from __future__ import annotations

import sys

import typer

from .run import make_dataset_command, run_command

app = typer.Typer(
    name="trainpilot",
    help="TrainPilot: a hardware-aware agent that picks where your network trains fastest, trains it there, and learns from the difference.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)
headless = typer.Typer(
    help="The agent without the terminal UI, for scripts and CI: progress on stderr, results on stdout.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
app.add_typer(headless, name="headless")
headless.command("run")(run_command)
headless.command("make-dataset")(make_dataset_command)
headless.add_typer(__import__("trainpilot_tui.cli.planning", fromlist=["app"]).app)  # plan, history, calibrate (planning.py)


@app.command("tui")
def tui_command(
    model: str = typer.Option("small_cnn", "--model", "-m", help="Model to train (as for `headless run`)."),
    dataset: str = typer.Option(None, "--dataset", "-d", help="Dataset (as for `headless run`; default: the bundled demo set)."),
    epochs: int = typer.Option(3, "--epochs", "-e", help="Epochs to train."),
    batch_size: int = typer.Option(64, "--batch-size", "-b", help="Mini-batch size."),
    lr: float = typer.Option(1e-3, "--lr", help="Adam learning rate."),
    seed: int = typer.Option(0, "--seed", help="Seed."),
    backend: str = typer.Option("auto", "--backend", help="auto, cpu, ane, mps or cuda."),
    threads: int = typer.Option(None, "--threads", help="CPU threads (default: the agent decides)."),
    theme: str = typer.Option(None, "--theme", help="Theme name or a theme file from themes/."),
) -> None:
    """Open the interactive terminal app (same options as `headless run`)."""
    from trainpilot_tui.app_main import launch

    from .run import session_config

    config = session_config(model=model, dataset=dataset, epochs=epochs, batch_size=batch_size, lr=lr, seed=seed, backend=backend, threads=threads)
    raise typer.Exit(launch(config, theme=theme))


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the exit code instead of raising, so `python -m` wrappers can use it."""
    from trainpilot.errors import TrainPilotError

    try:
        app(args=argv if argv is not None else sys.argv[1:], prog_name="trainpilot", standalone_mode=True)
    except SystemExit as exc:
        return int(exc.code or 0) if not isinstance(exc.code, str) else 1
    except TrainPilotError as exc:
        typer.echo(f"error: {exc}", err=True)
        return 1
    return 0
