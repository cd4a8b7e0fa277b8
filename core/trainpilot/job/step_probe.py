"""A few of the job's own training steps, timed on one thread before planning.

The roofline predicts a step from FLOPs and bytes at rates calibrated on the zoo's layers; a job's
own ops may run at other rates (attention's small batched matmuls, depthwise convolutions, many
small element-wise ops). Timing its real step once, on one thread, gives the cost model the
job's own pace (predict/roofline.py `probe_ratio`); the thread scaling and the load's effect
still come from calibration. One thread: on a machine with a busy core, a one-thread step is the
one the other load disturbs least. When the machine is quiet during a second probe on every core,
that one gives the job's own thread scaling too (its small ops may scale worse than the zoo's).
"""

from __future__ import annotations

import time
from typing import Any

PROBE_MAX_S = 1.0  # stop timing once this much time has gone (after one timed step at least)
PROBE_MAX_STEPS = 20


def probe_step(model: Any, batch: Any, objective: Any, make_optimizer: Any, threads: int = 1) -> float:
    """The fastest of a few steady training steps of `model` on `batch` (forward, loss, backward,
    optimizer step) on `threads` threads; the first step (allocations, lazy init) is not counted."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        optimizer = make_optimizer(model.parameters())
        model.train()
        times: list[float] = []
        start = time.perf_counter()
        for i in range(PROBE_MAX_STEPS + 1):
            began = time.perf_counter()
            optimizer.zero_grad(set_to_none=True)
            loss = objective(model, batch)[0]
            loss.backward()
            optimizer.step()
            float(loss.detach())
            if i:
                times.append(time.perf_counter() - began)
                if time.perf_counter() - start > PROBE_MAX_S:
                    break
        return min(times)
    finally:
        torch.set_num_threads(before)
        model.zero_grad(set_to_none=True)
