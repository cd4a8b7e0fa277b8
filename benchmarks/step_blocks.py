"""Does the compression's timing understate the speed-up training sees? cycles.measure_steps
alternates the dense and the pruned model one step at a time, so every step it times follows a step
of the other model, its caches holding that model's weights and activations; a training run steps
one model after itself. Dense and pruned small_cnn timed three ways, each three times, in one process:

    one step each   cycles.measure_steps itself (21 steps each, median)
    turns of 5      the models take turns of 5 consecutive steps, the first of each turn not counted
    runs of 40      each model 40 steps in a row, alternating three times: what a training run sees

    python benchmarks/step_blocks.py                     # small_cnn on 8x8 digits (batch 512) and 28x28 (batch 64), about 1 min
    python benchmarks/step_blocks.py --kept 8/16 12/12 --shape 28

Where "turns of 5" and "runs of 40" lie above "one step each", the figures compress.py reports are
conservative for training. Timing warm steps was tried inside measure_steps and not kept: it doubled
the spread between timings (benchmarks/step_noise.py; figures in docs/measurements.md).
"""
from __future__ import annotations

import argparse
import copy
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "core"))
sys.path.insert(0, str(ROOT / "benchmarks"))


def alternate(models: dict, x, y, *, block: int, rounds: int) -> float:
    """dense's median step over pruned's, the two taking turns of `block` consecutive steps for
    `rounds` rounds (the first round, and the first step of each turn, not counted)."""
    import torch
    from torch import nn

    copies = {k: copy.deepcopy(m).train() for k, m in models.items()}
    opts = {k: torch.optim.Adam(m.parameters(), lr=1e-3) for k, m in copies.items()}
    samples: dict[str, list[float]] = {k: [] for k in copies}
    for r in range(rounds):
        for k in (list(copies) if r % 2 == 0 else list(copies)[::-1]):
            for i in range(block):
                start = time.perf_counter()
                opts[k].zero_grad(set_to_none=True)
                nn.functional.cross_entropy(copies[k](x), y).backward()
                opts[k].step()
                if r > 0 and i > 0:
                    samples[k].append(time.perf_counter() - start)
    return statistics.median(samples["dense"]) / statistics.median(samples["pruned"])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kept", nargs="+", default=["8/16", "12/12", "10/8", "6/32"], help="small_cnn channels kept, e.g. 8/16")
    parser.add_argument("--shape", type=int, choices=(8, 28), action="append", help="image side (default both: 8 at batch 512, 28 at batch 64)")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()

    import torch

    from compress_resolution import kept_counts, pruned_to
    from trainpilot.compress.cycles import measure_steps
    from trainpilot.compress.prune import check_prunable
    from trainpilot.job.models import build_model

    torch.set_num_threads(args.threads)
    print(f"small_cnn dense over pruned, {args.threads} threads; each cell: median of 3 timings (the three)")
    print(f"{'set':<14} {'kept':<7} {'one step each':<24} {'turns of 5':<24} {'runs of 40':<24}")
    for side in args.shape or [8, 28]:
        shape, batch = (1, side, side), (512 if side == 8 else 64)
        torch.manual_seed(0)
        dense = build_model("small_cnn", shape, 10)
        layers = check_prunable(dense, shape)
        full = {layer.name: layer.out_channels for layer in layers.prunable}
        x, y = torch.randn(batch, *shape), torch.randint(0, 10, (batch,))
        for kept_text in args.kept:
            kept = kept_counts(parser, kept_text, list(full.values()))
            models = {"dense": dense, "pruned": pruned_to(dense, layers, full, kept, shape).model}
            one = [measure_steps(models, shape, 10, batch=batch, threads=args.threads, repeats=21).speedup("pruned") for _ in range(3)]
            blocks = [alternate(models, x, y, block=5, rounds=7) for _ in range(3)]
            runs = [alternate(models, x, y, block=40, rounds=4) for _ in range(3)]
            cells = [f"{statistics.median(v):.2f}x ({' '.join(f'{t:.2f}' for t in v)})" for v in (one, blocks, runs)]
            print(f"{f'{side}x{side} b{batch}':<14} {kept_text:<7} " + " ".join(f"{c:<24}" for c in cells), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
