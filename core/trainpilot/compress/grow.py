"""Free channels: give a fast-enough configuration back the channels its target does not charge for.

On a real machine a training step does not get cheaper channel by channel: the kernels work on
blocks of channels, so step time falls in steps. Measured here (small_cnn on 8x8 digits, batch 512,
2 threads, dense and pruned interleaved): 8/11 and 8/16 channels kept step alike (1.74x and 1.71x
over dense), 8/17 falls to 1.46x. A configuration the search found fast enough usually sits inside
such a step with channels to spare, and the search cannot see them: its 100-step fine-tunes rank
configurations far more coarsely than a few channels' worth of accuracy. So, before a finalist gets
its deployment fine-tune, each prunable layer in turn takes back the most channels that keep the
*measured* speed-up at or above the threshold (bisection on the layer's channel count, the dense
and the candidate model timed side by side): the same cycles target, more capacity. On small_cnn /
digits the grown 8/16 has a lower validation loss than 8/11 (0.125 against 0.133 after the same
fine-tune; benchmarks/compress_resolution.py).

On a described machine the cycles are the cost model's predictions, which fall smoothly: growth
then only takes back what the prediction allows. The grown model's speed-up is measured once more at
the end; if that measurement falls below the threshold, the configuration stays as it was.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .prune import PrunedModel


@dataclass(frozen=True)
class Grown:
    pruned: PrunedModel  # the grown configuration (the start itself when nothing could be taken back)
    speedup: float | None  # its cycles speed-up, confirmed by the last measurement; None when unchanged
    probes: int  # configurations timed


def grow(evaluator: Any, start: PrunedModel, *, threshold: float, repeats: int) -> Grown:
    """The configuration `start` with each prunable layer (in network order) given back the most
    output channels whose model's speed-up over the dense one stays >= `threshold`. `evaluator`
    supplies the dense model, the pruning (`prune`) and the cycles (`cycles`: measured or predicted)."""
    full = {layer.name: layer.out_channels for layer in evaluator.layers.prunable}
    kept = dict(start.kept)
    best: PrunedModel | None = None
    probes = 0
    for name in full:
        lo, hi = kept[name], full[name]  # lo: fast enough (the start was); find the largest that is
        while lo < hi:
            mid = (lo + hi + 1) // 2
            candidate = evaluator.prune(sparsity_for({**kept, name: mid}, full))
            probes += 1
            if _speedup(evaluator, candidate, repeats) >= threshold:
                lo, best = mid, candidate
            else:
                hi = mid - 1
        kept[name] = lo
    if best is None:
        return Grown(start, None, probes)
    # `best` is the last candidate accepted, which holds every layer's final count. One more
    # measurement confirms it: the bisection's last step was decided by one, close to the threshold.
    confirmed = _speedup(evaluator, best, repeats)
    probes += 1
    if confirmed < threshold:
        return Grown(start, None, probes)
    return Grown(best, confirmed, probes)


def sparsity_for(kept: dict[str, int], full: dict[str, int]) -> dict[str, float]:
    """The per-layer sparsities that keep exactly `kept` channels of `full` (prune's rounding keeps them)."""
    return {name: 1.0 - kept[name] / full[name] for name in full}


def _speedup(evaluator: Any, candidate: PrunedModel, repeats: int) -> float:
    return evaluator.cycles(candidate.model, repeats).speedup("pruned")
