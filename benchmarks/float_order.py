"""How far float order alone carries a training run: plain PyTorch, no TrainPilot in the loop.

    python benchmarks/float_order.py                 # the byo regression job: MLP, Adam, 460 steps
    python benchmarks/float_order.py --steps 1000

Two copies of one model, the same initial weights, the same batches in the same order, one thread.
Copy A steps on each whole batch; copy B on the same batch as two halves, each half's mean loss
weighted 1/2 (what two ranks or the split plan compute for a mean loss). The two gradients are equal
up to float rounding (the sums run in another order), so every difference printed is float order
and what the trajectory makes of it: the max weight difference relative to the largest weight, at
a few steps. This is the spread against which a 2-rank run's end weights are read
(docs/measurements.md, "Your own job on two ranks").
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))


def relative(a: torch.nn.Module, b: torch.nn.Module) -> float:
    with torch.no_grad():
        return max(float((p - q).abs().max() / q.abs().max()) for p, q in zip(a.parameters(), b.parameters(), strict=True))


def main(argv: list[str] | None = None) -> int:
    import byo_jobs

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=460, help="optimizer steps (460: one epoch of the byo regression job)")
    parser.add_argument("--lr", type=float, default=1e-3)
    opts = parser.parse_args(argv)
    torch.set_num_threads(1)
    X, y = byo_jobs.make_regression().data
    torch.manual_seed(0)
    whole, halves = byo_jobs.regression_mlp(), byo_jobs.regression_mlp()
    halves.load_state_dict(whole.state_dict())
    opt_whole = torch.optim.Adam(whole.parameters(), opts.lr)
    opt_halves = torch.optim.Adam(halves.parameters(), opts.lr)
    loss = torch.nn.MSELoss()
    order = torch.randperm(len(X), generator=torch.Generator().manual_seed(1))
    marks = {0, 10, 50, 100, 200, 250, 300, 350, 400, opts.steps - 1}
    print(f"{'step':>5} {'max weight diff (relative)':>27}")
    for step in range(opts.steps):
        start = (step * 64) % (len(X) - 64)
        idx = order[start : start + 64]
        xb, yb = X[idx], y[idx]
        opt_whole.zero_grad()
        loss(whole(xb).squeeze(-1), yb).backward()
        opt_whole.step()
        opt_halves.zero_grad()
        for half in (slice(0, 32), slice(32, 64)):
            (loss(halves(xb[half]).squeeze(-1), yb[half]) * 0.5).backward()
        opt_halves.step()
        if step in marks:
            print(f"{step + 1:>5} {relative(halves, whole):>27.2e}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
