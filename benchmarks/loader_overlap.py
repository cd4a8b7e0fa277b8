"""How much one DataLoader worker buys on this machine, in a plain PyTorch loop and in TrainPilot's,
side by side: byo_jobs.py's augmented Dataset and small CNN, 3 epochs, the two plans byo.py
compares — 1 thread with 1 worker (the agent's usual pick) and 2 threads with none (Lightning's
default here). Prints ms per training step (fetching the batch included), twice, alternating.

    flock -x /tmp/tp-cpu.lock python benchmarks/loader_overlap.py
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from torch.utils.data import DataLoader

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "core"))
sys.path.insert(0, str(ROOT / "benchmarks"))
os.environ.setdefault("TRAINPILOT_HOME", tempfile.mkdtemp(prefix="tp-overlap-"))

import trainpilot  # noqa: E402
from byo_jobs import JOBS, AugmentedImages, small_cnn  # noqa: E402
from trainpilot.machine.allocator import keep_freed_memory  # noqa: E402

EPOCHS = 3


def plain(workers: int, threads: int) -> float:
    """ms a step of a plain loop over the same training split's size and batches."""
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    data = AugmentedImages(1536)
    order = np.random.default_rng(0).permutation(1382)  # the 90 % a run trains on
    batches = [order[i : i + 64].tolist() for i in range(0, len(order), 64)]
    model = small_cnn()
    optimizer = torch.optim.Adam(model.parameters(), 1e-3)
    loader = DataLoader(data, batch_sampler=batches, num_workers=workers, persistent_workers=workers > 0)
    total, steps = 0.0, 0
    for _ in range(EPOCHS):
        batches_left = iter(loader)
        while True:
            start = time.perf_counter()
            try:
                x, y = next(batches_left)
            except StopIteration:
                break
            optimizer.zero_grad()
            loss = torch.nn.functional.cross_entropy(model(x), y)
            loss.backward()
            optimizer.step()
            float(loss.detach())
            total += time.perf_counter() - start
            steps += 1
    return total / steps * 1e3


def trainpilot_loop(workers: int, threads: int) -> float:
    result = trainpilot.fit(
        JOBS["augmented"](), epochs=EPOCHS, backend="cpu", threads=threads, workers=workers, record_history=False
    )
    return result.actual_s / (EPOCHS * 22) * 1e3  # 22 steps an epoch


def main() -> None:
    keep_freed_memory()  # as a TrainPilot run does
    print("ms a step:   plain 1t+1w   TrainPilot 1t+1w   plain 2t+0w   TrainPilot 2t+0w")
    for _ in range(2):
        a, b, c, d = plain(1, 1), trainpilot_loop(1, 1), plain(0, 2), trainpilot_loop(0, 2)
        print(f"{a:22.1f} {b:18.1f} {c:13.1f} {d:18.1f}   ratio 2t+0w / 1t+1w: plain {c / a:.2f}x, TrainPilot {d / b:.2f}x")


if __name__ == "__main__":
    main()
