"""benchmarks/plan_vs_default.py runs end to end on a zoo job and prints its table
and verdicts (the figures themselves are measured by running it alone: docs/measurements.md)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_plan_vs_default_prints_its_table_and_verdicts(tmp_path):
    env = {**os.environ, "TRAINPILOT_HOME": str(tmp_path), "TRAINPILOT_AUTO_CALIBRATE": "0"}
    out = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "plan_vs_default.py"), "--jobs", "mlp", "--passes", "1",
         "--epochs", "1", "--home", str(tmp_path)],
        capture_output=True, text=True, env=env, timeout=600,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    for line in ("mlp", "D/A on any job", "regret against the best measured plan",
                 "prediction error, new plans", "mixed precision"):
        assert line in out.stdout, out.stdout
