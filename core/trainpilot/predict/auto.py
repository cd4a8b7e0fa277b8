"""Auto-calibration: the first time TrainPilot meets a machine, a quick calibration (a few seconds)
runs before the agent thinks, so the cost model decides from the first run on. A full calibration
(`trainpilot headless calibrate`) replaces it whenever the user asks.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from trainpilot.predict.model import CostModel

# Set to 0 to switch the first-sight calibration off (test suites, CI runners that only check
# behaviour): the agent then keeps the rule cascade until `trainpilot headless calibrate` runs.
AUTO_CALIBRATE_ENV = "TRAINPILOT_AUTO_CALIBRATE"


def auto_calibration_enabled() -> bool:
    return os.environ.get(AUTO_CALIBRATE_ENV, "1").strip().lower() not in ("0", "false", "no", "off")


def ensure_calibrated(
    model: CostModel, progress: Callable[[float, str], None] | None = None, quick: bool = True
) -> bool:
    """Calibrate `model`'s machine if it never was (and TRAINPILOT_AUTO_CALIBRATE is not 0).
    Returns True when it measured now."""
    if model.is_calibrated or model.is_described or not auto_calibration_enabled():
        return False
    model.calibrate(progress=progress, quick=quick)
    return True


def open_calibrated(
    home: Path | str | None = None, hardware: Any = None, progress: Callable[[float, str], None] | None = None
) -> CostModel:
    """`CostModel.open(...)`, quick-calibrating first on a machine seen for the first time."""
    model = CostModel.open(home, hardware)
    ensure_calibrated(model, progress)
    return model
