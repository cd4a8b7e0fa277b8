"""Where TrainPilot keeps its state: one data directory for history, checkpoints and calibration.

`TRAINPILOT_HOME` wins (tests and CI point it at a temporary folder); otherwise the platform's user
data directory, so a user's runs survive upgrades and are found by every entry point.
"""

from __future__ import annotations

import os
from pathlib import Path

ENV_VAR = "TRAINPILOT_HOME"


def data_home() -> Path:
    override = os.environ.get(ENV_VAR)
    if override:
        home = Path(override).expanduser()
    else:
        from platformdirs import user_data_dir

        home = Path(user_data_dir("trainpilot", appauthor=False))
    home.mkdir(parents=True, exist_ok=True)
    return home


def runs_dir() -> Path:
    path = data_home() / "runs"
    path.mkdir(parents=True, exist_ok=True)
    return path


def run_dir(run_id: str) -> Path:
    path = runs_dir() / run_id
    path.mkdir(parents=True, exist_ok=True)
    return path


def history_db_path() -> Path:
    return data_home() / "history.sqlite3"


def calibration_dir() -> Path:
    path = data_home() / "calibration"
    path.mkdir(parents=True, exist_ok=True)
    return path
