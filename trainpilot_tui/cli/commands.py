"""The `trainpilot` command tree: `headless run|make-dataset|plan|history|calibrate|compress` and `tui`."""
from __future__ import annotations

import sys

import typer

from trainpilot_tui.app_main import tui_command

from .compress import compress_command
from .planning import app as planning_commands
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
headless.add_typer(planning_commands)  # plan, history, calibrate
headless.command("compress")(compress_command)


# `trainpilot tui` is `trainpilot-tui`: one definition of the app's options (see app_main).
app.command("tui")(tui_command)


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
