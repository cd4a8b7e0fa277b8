"""Cycles: what a model's training step costs on the target. On this machine they are measured —
the median of repeated real steps (forward, backward, Adam), the models interleaved step by step in
the same run, so a noisy machine slows all of them alike instead of biasing one. On a described
machine they are the cost model's predicted step time from the profile's published figures.
Every figure says which it is.
"""

from __future__ import annotations

import copy
import itertools
import statistics
import time
from collections.abc import Generator
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from trainpilot.compress.speedup_interval import SpeedupInterval, predicted_speedup, speedup_interval

MEASURED = "measured"
PREDICTED = "predicted"
WARMUP_STEPS = 2  # a fresh model's first steps allocate and pick kernels


@dataclass(frozen=True)
class StepTimes:
    label: str  # "measured" | "predicted"
    seconds: dict[str, float]  # median step time per model key
    batch: int
    where: str  # "this machine, 2 threads" | "Apple M2, mps (predicted from published figures)"
    repeats: int = 0  # measured steps per model (0 for predictions)
    # every measured step time per model key, round by round (entry i of each timed in round i)
    rounds: dict[str, tuple[float, ...]] = field(default_factory=dict)

    def speedup(self, key: str, base: str = "dense") -> float:
        return self.seconds[base] / self.seconds[key]

    def interval(self, key: str, base: str = "dense") -> SpeedupInterval:
        """`key`'s speed-up over `base` with its interval over the paired rounds (speedup_interval.py);
        a prediction's is exact."""
        if self.label == PREDICTED:
            return predicted_speedup(self.speedup(key, base))
        return speedup_interval(self.rounds[base], self.rounds[key])

    def to_dict(self) -> dict[str, Any]:
        return {
            "label": self.label,
            "seconds": dict(self.seconds),
            "batch": self.batch,
            "where": self.where,
            "repeats": self.repeats,
        }


def timed_rounds(
    models: dict[str, nn.Module],
    sample_shape: tuple[int, ...],
    num_classes: int,
    *,
    batch: int,
    threads: int,
    seed: int = 0,
) -> Generator[dict[str, float], None, None]:
    """One training step of every model per round, for as many rounds as the caller takes: each
    round's step time per model key, in an order that rotates so no model is always timed first in
    a round. The models are copied first (timing trains them). Timed under the allocator TrainPilot
    trains with (machine/allocator.py): with glibc's defaults each step faulted its buffers in
    afresh, and one pair's speed-up spread far wider across timings (benchmarks/step_noise.py) than
    without (measured: docs/measurements.md#memory-allocator). The thread count is set while a
    round runs and restored between rounds, so a caller may do its own work in between."""
    from trainpilot.machine.allocator import keep_freed_memory

    keep_freed_memory()
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(batch, *sample_shape, generator=gen)  # dense kernels take as long on any values
    y = torch.randint(0, num_classes, (batch,), generator=gen)
    keys = list(models)
    copies = {k: copy.deepcopy(m).train() for k, m in models.items()}
    optimizers = {k: torch.optim.Adam(m.parameters(), lr=1e-3) for k, m in copies.items()}
    for round_ in itertools.count():
        shift = round_ % len(keys)
        times: dict[str, float] = {}
        previous = torch.get_num_threads()
        torch.set_num_threads(threads)
        try:
            for key in keys[shift:] + keys[:shift]:
                model, opt = copies[key], optimizers[key]
                start = time.perf_counter()
                opt.zero_grad(set_to_none=True)
                nn.functional.cross_entropy(model(x), y).backward()
                opt.step()
                times[key] = time.perf_counter() - start
        finally:
            torch.set_num_threads(previous)
        if round_ >= WARMUP_STEPS:
            yield times


def step_times(rounds: list[dict[str, float]], batch: int, threads: int) -> StepTimes:
    """Measured rounds (timed_rounds) as StepTimes: each model's median, and every round kept."""
    keys = list(rounds[0]) if rounds else []
    per_key = {k: tuple(r[k] for r in rounds) for k in keys}
    return StepTimes(
        MEASURED,
        {k: statistics.median(v) for k, v in per_key.items()},
        batch,
        f"this machine, {threads} thread{'s' if threads != 1 else ''}",
        len(rounds),
        per_key,
    )


def measure_steps(
    models: dict[str, nn.Module],
    sample_shape: tuple[int, ...],
    num_classes: int,
    *,
    batch: int,
    threads: int,
    repeats: int,
    seed: int = 0,
) -> StepTimes:
    """Median training-step time of each model over `repeats` interleaved rounds (timed_rounds)."""
    source = timed_rounds(models, sample_shape, num_classes, batch=batch, threads=threads, seed=seed)
    rounds = list(itertools.islice(source, repeats))
    source.close()
    return step_times(rounds, batch, threads)


def predict_steps(
    models: dict[str, nn.Module], sample_shape: tuple[int, ...], num_classes: int, *, batch: int, machine: Any
) -> StepTimes:
    """The cost model's step time for each model on a described machine (a TargetMachine), all on
    the plan it predicts fastest for the first model (the dense one): the same plan for all, so the
    ratio is the pruning's, not a change of device."""
    from trainpilot.job.workload import profile_model
    from trainpilot.plans import Plan
    from trainpilot.predict.derive import calibration_for_target, target_plans
    from trainpilot.predict.features import features_of
    from trainpilot.predict.roofline import estimate

    calibration = calibration_for_target(machine)
    features = {
        k: features_of(profile_model(m, sample_shape, num_classes, batch, batch_size=batch)) for k, m in models.items()
    }
    first = next(iter(features.values()))
    # the ANE's frozen-backbone mode trains only a head: not a step of the whole model
    plans = [p for p in target_plans(machine) if p.backend != "ane"]
    timed = [(est.step_s, p) for p in plans if (est := estimate(first, p, 0.0, calibration)) is not None]
    best: Plan = min(timed, key=lambda t: t[0])[1]
    seconds = {}
    for key, feats in features.items():
        est = estimate(feats, best, 0.0, calibration)
        assert est is not None  # the same plan estimated the first model
        seconds[key] = est.step_s
    return StepTimes(PREDICTED, seconds, batch, f"{machine.name}, {best.label} (predicted from published figures)")
