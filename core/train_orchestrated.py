"""The seed project's training module, kept working.

    from train_orchestrated import TrainingEnvironment
    python -m train_orchestrated --model small_cnn --dataset DIR     # exit 0 = success, 1 = failure

The command is `trainpilot headless run` under its old name.
"""

from __future__ import annotations

import sys

from trainpilot.compat.environment import TrainingEnvironment

__all__ = ["TrainingEnvironment", "main"]


def main(argv: list[str] | None = None) -> int:
    from trainpilot_tui.cli import main as cli_main

    return cli_main(["headless", "run", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    sys.exit(main())
