"""One rank of the loopback all-reduce probe (`link.measure_loopback` starts two). Prints, on rank
0, one JSON line: {"ready_at": epoch seconds when the group formed, "timings": [[bytes, s], ...]}.
Each timing is the median of `repeats` all-reduces after one warm-up, so a single scheduler hiccup
on a shared machine does not become the machine's bandwidth."""

from __future__ import annotations

import json
import statistics
import sys
import time
from datetime import timedelta


def main(argv: list[str]) -> int:
    import torch
    import torch.distributed as dist

    sizes = [int(s) for s in argv[0].split(",")]
    repeats = int(argv[1])
    torch.set_num_threads(1)
    dist.init_process_group("gloo", timeout=timedelta(seconds=60))
    rank = dist.get_rank()
    dist.barrier()
    ready_at = time.time()
    timings = []
    for nbytes in sizes:
        t = torch.ones(max(nbytes // 4, 1), dtype=torch.float32)
        dist.all_reduce(t)  # warm-up: first use of a size sets up buffers
        runs = []
        for _ in range(repeats):
            dist.barrier()
            start = time.perf_counter()
            dist.all_reduce(t)
            runs.append(time.perf_counter() - start)
        timings.append([t.numel() * 4, statistics.median(runs)])
    dist.barrier()
    dist.destroy_process_group()
    if rank == 0:
        print(json.dumps({"ready_at": ready_at, "timings": timings}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
