"""How far apart two measurements of the same speed-up land on this machine: the same dense and
pruned small_cnn timed the way the compression benchmark times them (cycles.measure_steps, the
models interleaved, median of repeated steps), in several fresh processes. The spread between
processes is the resolution of any single measured speed-up here.

    python benchmarks/step_noise.py                # 4 processes x 3 timings, about 1 minute
    python benchmarks/step_noise.py --processes 6
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
KEPT = (10, 11)  # channels kept of small_cnn's 16 / 32: a configuration the search finds near 1.6x


def one_process(timings: int, repeats: int, threads: int) -> list[float]:
    sys.path.insert(0, str(ROOT / "core"))
    import torch

    from trainpilot.compress.cycles import measure_steps
    from trainpilot.compress.prune import check_prunable, prune
    from trainpilot.job.models import build_model

    torch.manual_seed(0)
    shape = (1, 28, 28)
    dense = build_model("small_cnn", shape, 10)
    layers = check_prunable(dense, shape)
    first, second = (layer.name for layer in layers.prunable)
    pruned = prune(dense, layers, {first: 1 - KEPT[0] / 16, second: 1 - KEPT[1] / 32}, shape).model
    return [measure_steps({"dense": dense, "pruned": pruned}, shape, 10, batch=64, threads=threads, repeats=repeats, seed=i).speedup("pruned")
            for i in range(timings)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--processes", type=int, default=4)
    parser.add_argument("--timings", type=int, default=3, help="timings per process (fresh model copies each)")
    parser.add_argument("--repeats", type=int, default=21, help="steps per model per timing (the deployment controller's count)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(one_process(args.timings, args.repeats, args.threads)))
        return 0
    all_ratios = []
    for p in range(args.processes):
        out = subprocess.run([sys.executable, __file__, "--child", "--timings", str(args.timings), "--repeats", str(args.repeats),
                              "--threads", str(args.threads)], capture_output=True, text=True, check=True)
        ratios = json.loads(out.stdout)
        all_ratios += ratios
        print(f"process {p + 1}: dense / pruned {KEPT[0]}/{KEPT[1]} = " + ", ".join(f"{r:.2f}x" for r in ratios), flush=True)
    lo, hi, mid = min(all_ratios), max(all_ratios), statistics.median(all_ratios)
    print(f"small_cnn dense / {KEPT[0]}/{KEPT[1]} channels, batch 64, {args.threads} threads, median of {args.repeats} interleaved steps:"
          f" {lo:.2f}x to {hi:.2f}x over {len(all_ratios)} timings (median {mid:.2f}x; spread {100 * (hi - lo) / mid:.0f} % of it)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
