"""The reward of one sparsity configuration, as the patent states it: did the model reach the
accuracy threshold (after a short fine-tune, on held-out data), and did it reach the target cycle
reduction (speed-up = dense cycles / pruned cycles)?

    reward = BOTH_MET * [accuracy >= threshold and speedup >= target]
             + ACCURACY_WEIGHT * (accuracy - threshold)       (accuracy as a fraction)
             - SPEED_WEIGHT * max(0, 1 - speedup / target)

Past the target, more speed earns nothing, so among configurations that are fast enough the most
accurate wins; short of it, every missing bit of speed costs, so the agent is pulled to the target
first. One accuracy point is worth 0.1; missing a 1.5x target by 0.15x costs 0.3.
"""

from __future__ import annotations

from dataclasses import dataclass

BOTH_MET = 1.0
ACCURACY_WEIGHT = 10.0
SPEED_WEIGHT = 3.0


@dataclass(frozen=True)
class Reward:
    value: float
    accuracy_met: bool
    speed_met: bool

    @property
    def both_met(self) -> bool:
        return self.accuracy_met and self.speed_met


def compression_reward(accuracy: float, threshold: float, speedup: float, target_speedup: float) -> Reward:
    """`accuracy` and `threshold` as fractions in [0, 1]; speed-ups as ratios (> 1 is faster)."""
    if target_speedup <= 1.0:
        raise ValueError(f"the target speed-up must be above 1, got {target_speedup}")
    accuracy_met = accuracy >= threshold
    speed_met = speedup >= target_speedup
    value = (
        (BOTH_MET if accuracy_met and speed_met else 0.0)
        + ACCURACY_WEIGHT * (accuracy - threshold)
        - SPEED_WEIGHT * max(0.0, 1.0 - speedup / target_speedup)
    )
    return Reward(value, accuracy_met, speed_met)
