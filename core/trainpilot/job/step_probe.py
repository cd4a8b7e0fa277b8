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

import functools
import math
import time
from collections.abc import Callable, Sequence
from typing import Any

PROBE_MAX_S = 1.0  # stop timing once this much time has gone (after one timed step at least)
PROBE_MAX_STEPS = 20
# ...but time for this long at least: twenty steps of a small model last a few milliseconds, a
# window that one moment of another process's load can cover whole; the fastest step of a longer
# one is the job's (docs/measurements.md#same-math-faster-plan_vs_defaultpy)
PROBE_MIN_S = 0.25


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
        i = 0
        while True:
            began = time.perf_counter()
            optimizer.zero_grad(set_to_none=True)
            loss = objective(model, batch)[0]
            loss.backward()
            optimizer.step()
            float(loss.detach())
            if i:
                times.append(time.perf_counter() - began)
                spent = time.perf_counter() - start
                if spent > PROBE_MAX_S or (i >= PROBE_MAX_STEPS and spent >= PROBE_MIN_S):
                    break
            i += 1
        return min(times)
    finally:
        torch.set_num_threads(before)
        model.zero_grad(set_to_none=True)


SETTINGS_PROBE_S = 0.3  # per thread count: each variant's steps alternate with the default's for this long
SETTINGS_PROBE_MIN_ROUNDS = 3  # a round longer than the budget still times this many (after the warm-up)


def fastest_alternated(
    steps: Sequence[Callable[[], float]], *, budget_s: float, min_rounds: int, max_rounds: int | None = None
) -> list[float]:
    """The fastest time of each of `steps` (callables that take one training step and return its
    seconds), their steps alternated round by round, so a moment of load on a shared machine slows
    all of them alike. The first round warms up (allocations, the kernels' first choice) and is not
    counted; then rounds go on until `min_rounds` are counted and `budget_s` has passed since the
    first counted one, or `max_rounds` are counted."""
    for step in steps:
        step()
    best = [math.inf] * len(steps)
    start = time.perf_counter()
    rounds = 0
    while True:
        best = [min(b, step()) for b, step in zip(best, steps, strict=True)]
        rounds += 1
        if max_rounds is not None and rounds >= max_rounds:
            return best
        if rounds >= min_rounds and time.perf_counter() - start > budget_s:
            return best


def probe_settings(
    model: Any,
    batch: Any,
    objective: Any,
    make_optimizer: Any,
    variants: list[tuple[str | None, str | None]],
    threads: int,
) -> dict[str, float]:
    """How fast the job's own step runs in each (memory_format, precision) variant against
    PyTorch's default (NCHW, fp32): {variant key: variant step / default step}. Each variant
    trains its own copy of the model, and their steps alternate round by round, so a moment of
    load on this shared machine slows all of them alike; the fastest step of each counts
    (fastest_alternated)."""
    import copy

    import torch

    from trainpilot.job.layout import batch_to_layout, model_to_layout
    from trainpilot.job.precision import autocast
    from trainpilot.plans import settings_key

    def one_step(net: Any, optimizer: Any, inputs: Any, precision: str | None) -> float:
        began = time.perf_counter()
        optimizer.zero_grad(set_to_none=True)
        with autocast(torch.device("cpu"), precision):
            loss = objective(net, inputs)[0]
        loss.backward()
        optimizer.step()
        float(loss.detach())
        return time.perf_counter() - began

    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        runs = [(None, None), *variants]
        nets = [model_to_layout(copy.deepcopy(model), fmt) for fmt, _ in runs]
        optimizers = [make_optimizer(net.parameters()) for net in nets]
        batches = [batch_to_layout(batch, fmt) for fmt, _ in runs]
        for net in nets:
            net.train()
        steps = [
            functools.partial(one_step, net, opt, inputs, precision)
            for net, opt, inputs, (_fmt, precision) in zip(nets, optimizers, batches, runs, strict=True)
        ]
        best = fastest_alternated(steps, budget_s=SETTINGS_PROBE_S, min_rounds=SETTINGS_PROBE_MIN_ROUNDS)
        return {settings_key(fmt, p): best[i] / best[0] for i, (fmt, p) in enumerate(runs) if i}
    finally:
        torch.set_num_threads(before)
