"""What every CLI command shares: exit codes (an API), one-line errors, stderr console."""
from __future__ import annotations

import json
import sys
from typing import Any, NoReturn

import typer

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2
EXIT_SIGINT = 130
EXIT_SIGTERM = 143

BACKEND_CHOICES = ("auto", "cpu", "ane", "mps", "cuda", "split")


def fail(message: str, code: int = EXIT_FAILURE) -> NoReturn:
    """One line on stderr, no traceback, and the documented exit code."""
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(code)


def usage_error(message: str) -> NoReturn:
    fail(message, EXIT_USAGE)


def print_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2, default=str) + "\n")
    sys.stdout.flush()


def stderr_console() -> Any:
    from rich.console import Console

    return Console(stderr=True, highlight=False)
