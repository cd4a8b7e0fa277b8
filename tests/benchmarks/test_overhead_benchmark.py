"""benchmarks/overhead.py measures both loops for real and ends with the ratio (a tiny run here;
the figure itself comes from a full run: docs/measurements.md)."""
from __future__ import annotations

import re
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"


def test_overhead_benchmark_prints_both_epoch_times_and_the_ratio_last(capsys, monkeypatch):
    monkeypatch.syspath_prepend(str(BENCH))
    import overhead

    assert overhead.main(["--model", "mlp", "--samples", "200", "--epochs", "3", "--repeats", "1", "--threads", "1"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[0].startswith("model mlp (") and "1 thread(s)" in lines[0]
    bare = re.search(r"bare PyTorch loop: ([\d.]+) ms per epoch", lines[-3])
    pilot = re.search(r"TrainPilot: +([\d.]+) ms per epoch", lines[-2])
    ratio = re.fullmatch(r"ratio TrainPilot / bare: ([\d.]+)", lines[-1])
    pairs = re.fullmatch(r"pairs: 2; their ratios TrainPilot / bare range ([\d.]+) to ([\d.]+), median ([\d.]+) \(90 % interval ([\d.]+) to ([\d.]+)\)", lines[-4])
    assert bare and pilot and ratio and pairs, lines
    # the last line is the median of the pairs' ratios: between the smallest and the largest, inside its interval
    lo, hi, median, low, high = (float(v) for v in pairs.groups())
    r = float(ratio.group(1))
    assert r == median and lo <= r <= hi and lo <= low <= r <= high <= hi
    # each run prints its pairs, the warm-up epoch first: 3 epochs, 2 of them counted
    run = re.fullmatch(r"  run 1, bare / TrainPilot ms per epoch: (\d+)/(\d+), (\d+)/(\d+), (\d+)/(\d+)", lines[1])
    assert run and all(int(v) >= 0 for v in run.groups())
    sys.modules.pop("overhead", None)
