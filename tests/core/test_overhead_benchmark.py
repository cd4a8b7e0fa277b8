"""benchmarks/overhead.py measures both loops for real and ends with the ratio (a tiny run here;
the figure itself comes from a full run, see README)."""
from __future__ import annotations

import re
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"


def test_overhead_benchmark_prints_both_epoch_times_and_the_ratio_last(capsys, monkeypatch):
    monkeypatch.syspath_prepend(str(BENCH))
    import overhead

    assert overhead.main(["--model", "mlp", "--samples", "200", "--epochs", "2", "--repeats", "1", "--threads", "1"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[0].startswith("model mlp (") and "1 thread(s)" in lines[0]
    bare = re.search(r"bare PyTorch loop: ([\d.]+) ms per epoch", lines[-3])
    pilot = re.search(r"TrainPilot: +([\d.]+) ms per epoch", lines[-2])
    ratio = re.fullmatch(r"ratio TrainPilot / bare: ([\d.]+)", lines[-1])
    assert bare and pilot and ratio
    printed = float(pilot.group(1)) / float(bare.group(1))
    assert abs(float(ratio.group(1)) - printed) <= 0.01 * printed  # the ratio of the printed (rounded) times
    sys.modules.pop("overhead", None)
