"""How far past the target the search aims: the measured timing noise of this machine.

A configuration the search finds at the target is re-measured at deployment, and a re-measurement
lands anywhere within the timing noise of the first (docs/compression.md#where-the-speed-was-lost).
So the search, the shortlist of finalists and the baselines count a single speed-up figure as fast
enough only when it clears the target times `aim`, where `aim` is read off an interval of the same
kind the deployment reads (speedup_interval.py): the dense model timed against itself, whose true
ratio is 1, over the rounds a deployment decision starts with. Its interval's lower end is how far
below the truth one such measurement can land; a model whose true speed-up is the target x aim
then measures at the target or above at the interval's confidence. A described machine's cycles
are predictions, exact: the aim there is 1.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from trainpilot.compress.speedup_interval import SpeedupInterval

# The aim where this machine's noise was not measured (an Evaluator or a search ranked on its own):
# measured speed-ups on a shared machine wobble by a few percent between runs.
DEFAULT_AIM = 1.05
# A noise reading this wide means the machine is too busy to time anything; aiming further would
# only make every target look impossible, so the aim stops here and the trace says it did.
MAX_AIM = 1.25


@dataclass(frozen=True)
class SpeedAim:
    aim: float  # a single figure counts as fast enough at target x aim
    noise: SpeedupInterval | None  # the dense model against itself (None: a described machine's exact predictions)
    capped: bool = False  # the noise asked for more than MAX_AIM

    def text(self, target: float) -> str:
        if self.noise is None:
            return f"aiming at {target * self.aim:.2f}x: the target; predicted cycles are exact"
        capped = f", capped at {MAX_AIM:g}" if self.capped else ""
        return (
            f"aiming at {target * self.aim:.2f}x: the target {target:g}x times {self.aim:.3f}{capped}, this machine's"
            f" timing noise (the dense model against itself: {self.noise.text()})"
        )

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"aim": self.aim, "capped": self.capped}
        if self.noise is not None:
            out.update({"noise_" + k: v for k, v in self.noise.to_dict().items()})
        return out


def aim_from(noise: SpeedupInterval) -> SpeedAim:
    """The aim a self-timing's interval gives: its point over its lower end (>= 1), at most MAX_AIM."""
    wanted = max(noise.ratio / noise.low, 1.0)
    return SpeedAim(min(wanted, MAX_AIM), noise, wanted > MAX_AIM)


def measure_aim(evaluator: Any, rounds: int) -> SpeedAim:
    """The dense model timed against itself for `rounds` interleaved rounds, on `evaluator`'s setup."""
    if evaluator.target.is_described:
        return SpeedAim(1.0, None)
    times = evaluator.timed_here({"dense": evaluator.dense, "itself": evaluator.dense}, rounds)
    return aim_from(times.interval("itself"))
