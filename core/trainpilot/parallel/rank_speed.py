"""Each rank's measured speed, and the shares of every batch that follow from it.

A rank's speed is timed where it will train (its cores, its threads, the load it meets) on a
private copy of the model, so measuring changes no weight, no optimizer state and no random
stream: the run stays step-for-step equal to a single-process run. Every rank gathers every rank's
figure and computes the same shares from them (`hetero.shares`, the split planner's function), so
no rank needs to be told its share.
"""

from __future__ import annotations

import copy
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import nn

from trainpilot.parallel.group import RankGroup
from trainpilot.predict.shares import finish_time_shares

WARMUP_PASSES = 1
TIMED_PASSES = 3  # at least this many timed passes, and
MIN_TIMED_S = 0.3  # at least this long: a core shared with another process is shared in time
MAX_TIMED_PASSES = 200  # slices of a few ms, so a probe of 3 short passes can miss the sharing


@dataclass(frozen=True)
class RankSpeeds:
    per_sample_s: tuple[float, ...]  # each rank's measured seconds per sample (forward + backward)
    shares: tuple[int, ...]  # samples of one full batch per rank
    policy: str  # "measured" | "equal"
    source: str = "probe"  # "probe" (before training) or "epoch N" (that epoch's training steps)

    @property
    def samples_per_s(self) -> tuple[float, ...]:
        return tuple(1.0 / c for c in self.per_sample_s)

    def describe(self) -> str:
        speeds = ", ".join(f"rank {i} {s:,.0f}" for i, s in enumerate(self.samples_per_s))
        split = "/".join(str(n) for n in self.shares)
        why = "in proportion to speed" if self.policy == "measured" else "equal shares (asked for)"
        where = "" if self.source == "probe" else f" (from {self.source}'s training steps)"
        return f"measured samples/s{where}: {speeds}; batch split {split}, {why}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "per_sample_s": list(self.per_sample_s),
            "samples_per_s": list(self.samples_per_s),
            "shares": list(self.shares),
            "policy": self.policy,
            "source": self.source,
        }


SHARE_POLICIES = ("measured", "equal")  # how a batch is split among ranks: by measured speed, or evenly


def equal_shares(batch: int, world: int) -> tuple[int, ...]:
    return tuple(batch // world + (1 if r < batch % world else 0) for r in range(world))


def time_per_sample(model: nn.Module, x: torch.Tensor, y: torch.Tensor, device: torch.device) -> float:
    """`time_per_batch_sample` for a classifier's (x, y) under cross-entropy (the zoo's step)."""
    ce = nn.CrossEntropyLoss()
    return time_per_batch_sample(model, (x, y), lambda net, batch: (ce(net(batch[0]), batch[1]), None, None), device)


def time_per_batch_sample(model: nn.Module, batch: Any, objective: Any, device: torch.device) -> float:
    """Seconds per sample of forward + backward on a copy of `model`: the median over the passes.
    Each pass (tens of ms) spans many scheduler slices, so a core shared with a busy process slows
    every pass alike and the median keeps that; what it drops is a stray pass stretched by some
    unpinned process (the launcher, another command) that lands on a rank's core once, which
    made the mean call the unloaded rank slow and understate the measured slow-down (measured:
    docs/measurements.md#cited-in-the-code-ranks)."""
    from trainpilot.job.objective import batch_size_of, to_device

    probe = copy.deepcopy(model).to(device).train()
    batch = to_device(batch, device)
    times: list[float] = []
    i = 0
    while i < WARMUP_PASSES + TIMED_PASSES or (sum(times) < MIN_TIMED_S and len(times) < MAX_TIMED_PASSES):
        start = time.perf_counter()
        loss = objective(probe, batch)[0]  # the job's own loss or step: (loss, output, target)
        loss.backward()
        for p in probe.parameters():
            p.grad = None
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        if i >= WARMUP_PASSES:
            times.append(time.perf_counter() - start)
        i += 1
    return float(np.median(times)) / max(batch_size_of(batch), 1)


def measure_shares(
    group: RankGroup,
    model: nn.Module,
    sample: Any,
    objective: Any,
    batch: int,
    device: torch.device,
    policy: str = "measured",
) -> RankSpeeds:
    """Time this rank's step on `sample` (a batch of about one rank's share, the job's own loss or
    step), gather every rank's time, and split `batch` by finish time."""
    mine = time_per_batch_sample(model, sample, objective, device)
    per_sample = tuple(float(v) for v in group.gather(mine, "the speed measurement"))
    shares = finish_time_shares(batch, per_sample) if policy == "measured" else equal_shares(batch, group.world_size)
    return RankSpeeds(per_sample, shares, policy)


def refined_shares(
    group: RankGroup, step_per_sample_s: list[float], previous: RankSpeeds, batch: int, epoch: int
) -> RankSpeeds:
    """New shares from the speeds the ranks showed while training (StarPU's history-based model, per
    epoch): the probe runs for a fraction of a second before training, and a core shared with
    another process is not shared the same way then. Measured here: a rank whose core busy loops
    share probes slower by a factor that varies from run to run
    (docs/measurements.md#cited-in-the-code-ranks), but the launcher starts each rank in its own
    session, so with the kernel's autogroup the rank's core is split between sessions, not
    processes, and a rank that waits part of every step for the other gets back the time it slept.

    Each rank's figure is the mean over the last few epochs (trainer.StepClock.WINDOW_EPOCHS) of
    its full-batch steps' seconds per sample, from the forward's start to the gradients being
    ready (trainer.StepClock: its own compute with the preemption it met, none of its waiting for
    the others). The mean, not the
    median: a rank on a shared core runs some steps untouched and loses the core in others, and
    the step waits for both kinds. Scaled to the previous estimate's mean so the figures stay in
    the probe's units (the shares depend only on their ratio)."""
    mine = float(np.mean(step_per_sample_s)) if step_per_sample_s else 0.0
    seen = [float(v) for v in group.gather(mine, "the speed measurement of the epoch that ended")]
    if min(seen) <= 0.0:  # a rank timed no full batch (a very short epoch): keep what we had
        return previous
    scale = float(np.mean(previous.per_sample_s)) / float(np.mean(seen))
    per_sample = tuple(v * scale for v in seen)
    return RankSpeeds(per_sample, finish_time_shares(batch, per_sample), previous.policy, source=f"epoch {epoch}")
