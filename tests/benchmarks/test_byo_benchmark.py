"""benchmarks/byo.py runs end to end on one job and prints its verdict lines (the figures
themselves are measured by running it alone on a quiet machine: docs/measurements.md)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_byo_prints_its_table_and_verdicts(tmp_path):
    env = {**os.environ, "TRAINPILOT_HOME": str(tmp_path), "TRAINPILOT_AUTO_CALIBRATE": "0"}
    out = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "byo.py"), "--jobs", "regression", "--passes", "2", "--epochs", "1",
         "--home", str(tmp_path)],
        capture_output=True, text=True, env=env, timeout=600,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    for line in ("regression", "cold MAPE", "warm MAPE", "never slower by more than 5 %"):
        assert line in out.stdout, out.stdout
