"""The `trainpilot` command: a thin Typer layer over the core. Imports torch only inside commands,
so `trainpilot --help` answers at once.

The command tree lives in `commands.py`; this package's __init__ stays empty of imports so that
`trainpilot_tui.app_main`, which borrows `run`'s options from `cli.run`, can import this package's
modules without a cycle."""
from __future__ import annotations

from typing import Any


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the exit code instead of raising, so `python -m` wrappers can use it."""
    from .commands import main as run_main

    return run_main(argv)


def __getattr__(name: str) -> Any:
    if name == "app":
        from .commands import app

        return app
    raise AttributeError(f"module 'trainpilot_tui.cli' has no attribute {name!r}")
