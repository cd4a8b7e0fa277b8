"""How well one DataLoader worker overlaps loading with compute on this machine, without TrainPilot:
a plain PyTorch loop over byo_jobs.py's augmented Dataset and small CNN, one compute thread, with
0, 1 and 2 workers (persistent), three epochs each. Prints ms per step.

    flock -x /tmp/tp-cpu.lock python benchmarks/loader_overlap.py

It bounds what any plan can gain from workers here: loading and compute each cost ~17-20 ms a
batch, so a perfect overlap would give ~20 ms a step against ~37 ms without a worker.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np
import torch
from torch.utils.data import DataLoader

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "core"))
sys.path.insert(0, str(ROOT / "benchmarks"))

from byo_jobs import AugmentedImages, small_cnn  # noqa: E402

from trainpilot.machine.allocator import keep_freed_memory  # noqa: E402


def main() -> None:
    keep_freed_memory()  # as a TrainPilot run does
    torch.set_num_threads(1)
    data = AugmentedImages(1536)
    order = np.random.default_rng(0).permutation(1382)
    batches = [order[i : i + 64].tolist() for i in range(0, len(order), 64)]
    for workers in (0, 1, 2):
        torch.manual_seed(0)
        model = small_cnn()
        optimizer = torch.optim.Adam(model.parameters(), 1e-3)
        loader = DataLoader(data, batch_sampler=batches, num_workers=workers, persistent_workers=workers > 0)
        for epoch in range(3):
            start, steps = time.perf_counter(), 0
            for x, y in loader:
                optimizer.zero_grad()
                loss = torch.nn.functional.cross_entropy(model(x), y)
                loss.backward()
                optimizer.step()
                float(loss.detach())
                steps += 1
            print(f"{workers} worker(s), epoch {epoch + 1}: {(time.perf_counter() - start) / steps * 1e3:.1f} ms a step")


if __name__ == "__main__":
    main()
