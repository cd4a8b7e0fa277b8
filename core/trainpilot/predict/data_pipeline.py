"""The data pipeline's share of a step: loading a batch (items fetched, transformed, collated)
beside computing it.

    no workers:  step = compute + load                     (the training process does both)
    w workers:   step = max(compute', load / w) + handoff  (they overlap)

`compute'` is the compute step predicted with the workers' own CPU time — w processes busy
load/step of the time each — counted as load on the machine, through the same calibrated
contention model that predicts a busy core's effect (roofline_terms.load_weights); never less than
the CPU work of compute and loading spread over the cores other load leaves free; and with several
threads and workers oversubscribing those cores, at about one core's pace (a parallel region waits
for its slowest thread, whose core a worker keeps taking). So one thread and one worker on two
cores is a plan whose compute runs undisturbed while loading is hidden, and two threads with one
worker run little faster than everything on one core. `handoff` is the batch's trip
from the worker to the training process; the first batch of each epoch is loaded before anything
overlaps it; the workers start once a run (they persist between epochs).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from trainpilot.plans import Plan

WORKER_START_S = 0.02  # starting one DataLoader worker by fork (once a run: the workers persist between epochs)
SPAWN_START_S = 1.1  # one started by spawn: a fresh interpreter importing torch (2 workers: 2.2 s, docs/jobs.md)
HANDOFF_S = 2e-4  # one batch through the workers' queue (pickled, to shared memory, unpickled)


@dataclass(frozen=True)
class Pipeline:
    step_s: float  # a steady step, loading included
    compute_s: float  # its compute part, under the workers' load
    load_s: float  # one batch loaded by one process
    workers: int
    per_epoch_extra_s: float  # the epoch's first batch, which nothing overlaps
    start_s: float = 0.0  # the workers starting, once a run

    @property
    def stalls(self) -> bool:
        """Whether the training loop waits for batches (loading, not compute, sets the pace)."""
        return self.workers == 0 or self.load_s / self.workers > self.compute_s

    def describe(self, plan: Plan) -> str:
        ms = self.load_s * 1e3
        if self.workers == 0:
            return (
                f"loading {ms:.1f} ms a batch in the training process adds to each {self.compute_s * 1e3:.1f} ms step"
            )
        who = f"{self.workers} worker" + ("s" if self.workers != 1 else "")
        if self.stalls:
            return (
                f"{who}: loading {ms:.1f} ms a batch would stall the {self.compute_s * 1e3:.1f} ms step"
                f" ({self.load_s / self.workers * 1e3:.1f} ms a batch with {self.workers})"
            )
        verb = "hides" if self.workers == 1 else "hide"
        return f"{who} {verb} loading {ms:.1f} ms a batch behind the {self.compute_s * 1e3:.1f} ms step"


def pipeline(
    compute_step: Callable[[float], float],
    load_s: float,
    plan: Plan,
    busy_cores: float,
    logical_cpus: int,
    spawn: bool = False,
) -> Pipeline:
    """The steady step of `plan` with loading; `compute_step(busy_cores)` is its compute step under
    that much other load."""
    workers = int(plan.loader_workers or 0)
    idle_compute = compute_step(busy_cores)  # compute under the other load alone
    if workers == 0:
        return Pipeline(idle_compute + load_s, idle_compute, load_s, 0, 0.0)
    threads = plan.threads or 1 if plan.backend == "cpu" else 1
    free = max(float(logical_cpus) - busy_cores, 0.25)
    compute = _under_workers(compute_step, idle_compute, load_s, workers, busy_cores, float(logical_cpus))
    # The cores left by other load bound it too: compute's threads and the loading share them.
    shared = (idle_compute * min(float(threads), free) + load_s) / free
    if threads > 1 and threads + workers > free:
        # Oversubscribed: each parallel region waits for its slowest thread, whose core a worker
        # keeps taking, however short its turns; the threads' CPU work and the loading then go at
        # about one core's pace (2 threads + 1 worker on 2 cores: 33 ms a step measured, 35 ms
        # this way, 18 ms by the calibrated rates next to a steadily busy core).
        compute = max(compute, (idle_compute * threads + load_s) / max(free - workers, 1.0))
    step = max(compute, load_s / workers, shared) + HANDOFF_S
    return Pipeline(step, compute, load_s, workers, load_s, workers * (SPAWN_START_S if spawn else WORKER_START_S))


def _under_workers(
    compute_step: Callable[[float], float],
    idle_compute: float,
    load_s: float,
    workers: int,
    busy_cores: float,
    logical_cpus: float,
) -> float:
    """The compute step under the workers' own load: the workers' load slows compute, which lowers
    their duty (they wait for the step), which lowers their load: the step c with c = g(c), where
    g(c) is compute under busy_cores plus the cores w workers keep busy loading a batch each c.
    g falls as c grows, so there is one such c; it is found by bisection, because plain iteration
    oscillates where compute is very sensitive to load (a fast step in channels_last on 2 cores)."""

    def under(c: float) -> float:
        cores = min(float(workers), load_s / max(max(c, load_s / workers), 1e-9))
        return compute_step(min(busy_cores + cores, logical_cpus))

    low, high = idle_compute, max(under(idle_compute), idle_compute)
    for _ in range(16):  # the bracket shrinks to 1/65536 of its width
        mid = (low + high) / 2
        if under(mid) > mid:
            low = mid
        else:
            high = mid
    return (low + high) / 2
