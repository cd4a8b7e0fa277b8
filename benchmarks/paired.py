"""What the paired benchmarks (overhead.py, tui_overhead.py) share: how sure a median of paired
ratios is. On this shared 2-core machine the same run moves by 5-25 % from one minute to the next,
so a ratio printed alone says little; its interval says how far another run could land."""
from __future__ import annotations

import random
import statistics


def bootstrap_median(values: list[float], rounds: int = 2000, seed: int = 0) -> tuple[float, float]:
    """A 90 % percentile-bootstrap interval of the median of `values`."""
    rng = random.Random(seed)
    medians = sorted(statistics.median(rng.choices(values, k=len(values))) for _ in range(rounds))
    return medians[int(0.05 * rounds)], medians[int(0.95 * rounds) - 1]
