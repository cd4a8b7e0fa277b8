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
    # the ratio of the times behind the printed ones: each is rounded to 0.1 ms, which on a tiny
    # epoch of a few ms moves a ratio by more than 1 % (a fixed 1 % tolerance failed under load)
    p, b, r = float(pilot.group(1)), float(bare.group(1)), float(ratio.group(1))
    assert (p - 0.05) / (b + 0.05) - 0.0005 <= r <= (p + 0.05) / max(b - 0.05, 1e-9) + 0.0005
    sys.modules.pop("overhead", None)
