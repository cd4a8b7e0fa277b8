"""Confidence that the chosen plan really is the fastest.

If each predicted time is off by a log-normal error of spread `sigma` (the model's measured error
for this kind of workload), the chosen plan beats the runner-up when the difference of two such
errors does not eat the predicted margin:

    P(chosen faster) = Phi( ln(t_runner / t_chosen) / (sigma * sqrt(2)) )

A 2x margin with 25 % error gives ~0.97; a 5 % margin with the same error ~0.55; with 5 % error
(after a few runs of this workload) the 5 % margin already gives ~0.75.
"""

from __future__ import annotations

import math

FLOOR, CEILING = 0.5, 0.99  # never claim certainty; never below a coin flip between the best two


def confidence_from_margin(margin: float | None, sigma: float) -> float:
    """`margin` = t_runner / t_chosen - 1 (None: only one plan could run)."""
    if margin is None:
        return CEILING  # nothing to choose between: the only runnable plan is right by definition
    sigma = max(sigma, 1e-6)
    z = math.log1p(max(margin, 0.0)) / (sigma * math.sqrt(2.0))
    p = 0.5 * (1.0 + math.erf(z / math.sqrt(2.0)))
    return min(max(p, FLOOR), CEILING)
