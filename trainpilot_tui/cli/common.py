"""What every CLI command shares: exit codes (an API), one-line errors, stderr console."""
from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, NoReturn

import typer

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2
EXIT_SIGINT = 130
EXIT_SIGTERM = 143


def fail(message: str, code: int = EXIT_FAILURE) -> NoReturn:
    """One line on stderr, no traceback, and the documented exit code."""
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(code)


def usage_error(message: str) -> NoReturn:
    fail(message, EXIT_USAGE)


@contextmanager
def failures_as_one_line(unnamed_file: str = "data directory", also: tuple[type[Exception], ...] = ()) -> Iterator[None]:
    """The core's errors (and `also`) as one `error:` line with exit 1; a file error names its
    file, or `unnamed_file` when the OS did not say which."""
    from trainpilot.errors import TrainPilotError

    try:
        yield
    except (TrainPilotError, *also) as exc:
        fail(str(exc))
    except OSError as exc:
        fail(f"{getattr(exc, 'filename', None) or unnamed_file}: {exc.strerror or exc}")


def print_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2, default=str) + "\n")
    sys.stdout.flush()


def stderr_console() -> Any:
    from rich.console import Console

    return Console(stderr=True, highlight=False)
