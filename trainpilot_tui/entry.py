"""Console-script entry points. They install a quiet Ctrl-C (exit 130, no traceback) before the
heavier imports run: pressing Ctrl-C in the first fraction of a second is a normal thing to do."""
from __future__ import annotations

import signal
import sys

EXIT_SIGINT = 130


def _interrupted(_signum: int, _frame: object) -> None:
    raise SystemExit(EXIT_SIGINT)


def cli() -> int:
    signal.signal(signal.SIGINT, _interrupted)
    from trainpilot_tui.cli import main

    return main()


def tui() -> int:
    signal.signal(signal.SIGINT, _interrupted)
    from trainpilot_tui.app_main import main

    return main()


if __name__ == "__main__":
    sys.exit(cli())
