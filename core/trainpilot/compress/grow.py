"""Free channels: give a fast-enough configuration back the channels its target does not charge for.

On a real machine a training step does not get cheaper channel by channel: the kernels work on
blocks of channels, so step time falls in steps. Measured here (small_cnn on 8x8 digits, batch 512,
2 threads, dense and pruned interleaved): 8/11 and 8/16 channels kept step alike, 8/17 falls well
below them (docs/measurements.md#cited-in-the-code-compression). A configuration the search found
fast enough usually sits inside such a step with channels to spare, and the search cannot see them:
its 100-step fine-tunes rank configurations far more coarsely than a few channels' worth of
accuracy. So, before a finalist gets its deployment fine-tune, each prunable layer in turn takes
back the most channels that keep the *measured* speed-up at or above the threshold at the lower end
of its interval (the dense and the candidate model timed side by side in rounds until the interval
decides, speedup_repeats.py; which counts are probed, below) and its point at or above the threshold
times the aim (speed_margin.py): the same cycles target, more capacity. Growth that spent the aim
too would hand deployment a model at the target's edge, which a measurement minutes later, on a
machine that changed between the two, lands below (docs/compression.md, "With the interval").
On small_cnn / digits the grown 8/16 has a lower validation loss than 8/11 after the same
fine-tune (benchmarks/compress_resolution.py; measured: docs/measurements.md#cited-in-the-code-compression).

On this machine the blocks also make step time *not monotone* in the channel count: measured
(small_cnn on the 28x28 demo set, batch 64, 2 threads, 24 configurations interleaved with the
dense model) 8/24 kept stepped faster than 8/20 (docs/compression.md#the-method). A
bisection on the count steps over a fast count like 24 when it probes a slow 20. So measured
growth probes the counts on the kernels' channel grid (multiples of CHANNEL_STEP, and the full
width) from the widest down, and takes the first fast enough. On a described machine the cycles
are the cost model's predictions, which fall smoothly with the count: growth there bisects, and
takes back exactly what the prediction allows. The grown model's speed-up is measured once more at
the end; if that interval's lower end falls below the threshold, the configuration stays as it was.

A configuration off the grid can hold time it does not use: 9 channels cost the next block's 16.
`aligned_down` gives the controller a second starting point with each layer cut to the grid below
(9/13 -> 8/8), whose growth can spend the freed time where it buys more channels (8/24); which of
the two grown configurations deploys is decided on validation, like every other finalist.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from trainpilot.compress.prune import PrunedModel
from trainpilot.compress.speedup_interval import SpeedupInterval

# oneDNN's fp32 CPU kernels work on blocks of 8 channels (AVX2) or 16 (AVX-512); a multiple of 8 is
# a block edge on both. GPUs' tensor cores also want multiples of 8.
CHANNEL_STEP = 8


@dataclass(frozen=True)
class Grown:
    pruned: PrunedModel  # the grown configuration (the start itself when nothing could be taken back)
    speedup: float | None  # its cycles speed-up, confirmed by the last measurement; None when unchanged
    probes: int  # configurations timed
    interval: SpeedupInterval | None = None  # the confirming measurement's interval; None when unchanged


def grow(evaluator: Any, start: PrunedModel, *, threshold: float, aim: float = 1.0) -> Grown:
    """The configuration `start` with each prunable layer (in network order) given back the most
    output channels whose model's speed-up over the dense one stays >= `threshold` at the lower end
    of its interval (evaluator.decided: timed until the interval decides, or predicted, exact) and
    >= `threshold` x `aim` at its point: the search's margin past the noise is kept, not spent.
    `evaluator` supplies the dense model, the pruning (`prune`) and the cycles."""
    full = _full(evaluator)
    kept = dict(start.kept)
    best: PrunedModel | None = None
    probes = 0
    measured = not _is_described(evaluator)
    for name in full:
        if measured:  # the channel grid, widest first: the first fast enough is the most the blocks allow
            for count in grid_above(kept[name], full[name]):
                candidate = evaluator.prune(sparsity_for({**kept, name: count}, full))
                probes += 1
                if _clears(evaluator, candidate, threshold, aim):
                    kept[name], best = count, candidate
                    break
            continue
        lo, hi = kept[name], full[name]  # predicted cycles fall smoothly: bisect for the largest fast-enough count
        while lo < hi:
            mid = (lo + hi + 1) // 2
            candidate = evaluator.prune(sparsity_for({**kept, name: mid}, full))
            probes += 1
            if _clears(evaluator, candidate, threshold, aim):
                lo, best = mid, candidate
            else:
                hi = mid - 1
        kept[name] = lo
    if best is None:
        return Grown(start, None, probes)
    # `best` is the last candidate accepted, which holds every layer's final count. One more
    # measurement confirms it: of the many probes, the accepted one is the most likely to have been lucky.
    confirmed = _interval(evaluator, best, threshold)
    probes += 1
    if not _keeps(confirmed, threshold, aim):
        return Grown(start, None, probes)
    return Grown(best, confirmed.ratio, probes, confirmed)


def grid_above(kept: int, full: int, step: int = CHANNEL_STEP) -> list[int]:
    """The counts above `kept` that a layer of `full` channels can grow to on the kernels' grid,
    widest first: the full width, then the multiples of `step` below it."""
    return [full, *range((full - 1) // step * step, kept, -step)] if full > kept else []


def aligned_down(evaluator: Any, start: PrunedModel, step: int = CHANNEL_STEP) -> PrunedModel | None:
    """`start` with every layer above one block cut to the block edge below (9 -> 8, 13 -> 8), or
    None when every layer already sits on the grid (or within the first block)."""
    full = _full(evaluator)
    kept = {name: (k // step * step if k > step else k) for name, k in start.kept.items()}
    return None if kept == dict(start.kept) else evaluator.prune(sparsity_for(kept, full))


def _full(evaluator: Any) -> dict[str, int]:
    return {layer.name: layer.out_channels for layer in evaluator.layers.prunable}


def _is_described(evaluator: Any) -> bool:
    target = getattr(evaluator, "target", None)
    return bool(getattr(target, "is_described", False))


def sparsity_for(kept: dict[str, int], full: dict[str, int]) -> dict[str, float]:
    """The per-layer sparsities that keep exactly `kept` channels of `full` (prune's rounding keeps them)."""
    return {name: 1.0 - kept[name] / full[name] for name in full}


def _interval(evaluator: Any, candidate: PrunedModel, threshold: float) -> SpeedupInterval:
    return evaluator.decided(candidate.model, threshold).interval("pruned")


def _clears(evaluator: Any, candidate: PrunedModel, threshold: float, aim: float) -> bool:
    """Whether the candidate's speed-up clears `threshold` at its interval's lower end and the aim at
    its point: a growth step that might fall below the target, or that would spend the margin the
    search aimed with, is refused (an exact prediction's lower end and point are its value)."""
    return _keeps(_interval(evaluator, candidate, threshold), threshold, aim)


def _keeps(interval: SpeedupInterval, threshold: float, aim: float) -> bool:
    return interval.low >= threshold and interval.ratio >= threshold * aim
