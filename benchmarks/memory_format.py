"""Does the memory format of a CNN's tensors change its CPU training step, and the speed-up pruning
buys? TrainPilot trains (and the compression job times) convolutions in PyTorch's default NCHW
layout. This script times each zoo CNN's training step in NCHW and in channels_last (NHWC: model
and input converted), dense and with half of every prunable layer's channels removed, all four
interleaved step by step in one run (compress/cycles.measure_steps: median of repeated steps).

    python benchmarks/memory_format.py              # ~10 s on 2 cores; run it alone
    python benchmarks/memory_format.py --repeats 81

Printed per case: the four step times, what channels_last gains on the dense and on the pruned
model, and the pruning speed-up in each layout. A measurement for deciding whether the CPU plan
should choose the layout; nothing in TrainPilot changes its layout from this script.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "core"))

# (model, sample shape, batch): the compression benchmark's cases, at its timing batches
CASES = (("small_cnn", (1, 28, 28), 64), ("wide_cnn", (1, 28, 28), 64), ("small_cnn", (1, 8, 8), 512), ("wide_cnn", (1, 8, 8), 512))


def channels_last(model):  # type: ignore[no-untyped-def]
    """`model` (a copy) in channels_last, behind a first step that converts its input to it: what a
    training loop that chose the layout would run."""
    import copy

    import torch
    from torch import nn

    class ToChannelsLast(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x.contiguous(memory_format=torch.channels_last)

    return nn.Sequential(ToChannelsLast(), copy.deepcopy(model).to(memory_format=torch.channels_last))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=41, help="timed steps per model (after warm-up)")
    args = parser.parse_args()

    import torch

    from trainpilot.compress.cycles import measure_steps
    from trainpilot.compress.prune import check_prunable, prune
    from trainpilot.job.models import build_model

    print(f"training-step time, {args.threads} threads, median of {args.repeats} interleaved steps; 'half' = half of every"
          f" prunable layer's channels removed (torch-pruning)")
    print(f"{'case':<26} {'dense NCHW':>11} {'dense CL':>9} {'half NCHW':>10} {'half CL':>8}   {'CL gain dense':>13} {'CL gain half':>12}"
          f"   {'pruning x NCHW':>14} {'pruning x CL':>12}")
    for name, shape, batch in CASES:
        torch.manual_seed(0)
        dense = build_model(name, shape, 10)
        layers = check_prunable(dense, shape)
        half = prune(dense, layers, {layer.name: 0.5 for layer in layers.prunable}, shape).model
        t = measure_steps({"dense": dense, "dense_cl": channels_last(dense), "half": half, "half_cl": channels_last(half)}, shape, 10,
                          batch=batch, threads=args.threads, repeats=args.repeats).seconds
        ms = {k: v * 1e3 for k, v in t.items()}
        case = f"{name} {shape[1]}x{shape[2]} b{batch}"
        print(f"{case:<26} {ms['dense']:>9.2f}ms {ms['dense_cl']:>7.2f}ms {ms['half']:>8.2f}ms {ms['half_cl']:>6.2f}ms"
              f"   {t['dense'] / t['dense_cl']:>12.2f}x {t['half'] / t['half_cl']:>11.2f}x"
              f"   {t['dense'] / t['half']:>13.2f}x {t['dense_cl'] / t['half_cl']:>11.2f}x", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
