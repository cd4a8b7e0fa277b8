"""How long a compression job trains: the dense model's training and the deployment fine-tune, in
optimizer steps (the search's short fine-tune has its own step count, CompressConfig.finetune_steps).

By default the dense model trains DEFAULT_DENSE_EPOCHS epochs, but never on fewer than
DENSE_MIN_SAMPLES samples in all (2400 steps at the default batch of 64), and the deployment
fine-tune gets half the dense model's steps (a warm restart, finetune.RESTART_LR). An epoch count
given explicitly (--dense-epochs, --deploy-epochs) is taken as given: a test or a smoke run may
want a short one.

Why a floor in steps: a model converges after so many updates, not so many passes, and a small data
set gives few updates per pass. Measured at batch 64 with the dense recipe of job.train_dense
(benchmarks/compress_resolution.py --splits, which prints each split's dense test accuracy):
small_cnn on the 4800-sample demo set (3360 training samples, 48 epochs = 2520 steps) has converged
after 48 epochs; on scikit-learn's 1797 digits (1258 training samples, 48 epochs = 944 steps) it
has not, and tests better after 2400 steps. A dense model short of convergence flatters the pruned
one, whose fine-tune goes on training what the dense model had not finished learning: on the
digits splits, half of each layer kept (8/16) dropped about half as much against the 2400-step
dense model (fine-tuned 1200 steps) as against the 944-step one (fine-tuned 472), and tested more
accurate (measured: docs/measurements.md#training-budgets).

The floor was measured at batch 64 only. At another batch it keeps the samples seen, not the step
count (at batch 512, 300 steps): a step floor would multiply a large batch's cost by its size, and
whether a larger batch needs more or fewer samples to converge here was not measured.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from trainpilot.compress.finetune import samples_per_step, steps_for_epochs

DEFAULT_DENSE_EPOCHS = 48.0
# 2400 steps at batch 64: about the demo set's 48 epochs, after which 96 gain next to nothing (above)
DENSE_MIN_SAMPLES = 2400 * 64
DEPLOY_SHARE = 0.5  # of the dense model's steps, by default


@dataclass(frozen=True)
class Budget:
    dense_steps: int
    deploy_steps: int
    samples: int  # training samples
    batch: int
    why: str  # how the dense budget was set, for the progress line and the report

    def epochs(self, steps: int) -> float:
        return steps * samples_per_step(self.samples, self.batch) / max(self.samples, 1)

    def to_dict(self) -> dict[str, Any]:
        return {
            "dense_steps": self.dense_steps,
            "dense_epochs": round(self.epochs(self.dense_steps), 2),
            "deploy_steps": self.deploy_steps,
            "deploy_epochs": round(self.epochs(self.deploy_steps), 2),
            "batch": self.batch,
            "training_samples": self.samples,
            "why": self.why,
        }


def budget_for(
    samples: int, batch: int, *, dense_epochs: float | None = None, deploy_epochs: float | None = None
) -> Budget:
    """The steps of both trainings for `samples` training samples at `batch`. None: the default rule."""
    if dense_epochs is not None:
        dense, why = steps_for_epochs(dense_epochs, samples, batch), f"{dense_epochs:g} epochs, as given"
    else:
        by_epochs = steps_for_epochs(DEFAULT_DENSE_EPOCHS, samples, batch)
        least = math.ceil(DENSE_MIN_SAMPLES / samples_per_step(samples, batch))
        dense = max(by_epochs, least)
        why = (
            f"{DEFAULT_DENSE_EPOCHS:g} epochs"
            if dense == by_epochs
            else f"{DEFAULT_DENSE_EPOCHS:g} epochs are only {by_epochs} steps here; {least} is the least"
        )
    deploy = (
        steps_for_epochs(deploy_epochs, samples, batch)
        if deploy_epochs is not None
        else max(1, round(dense * DEPLOY_SHARE))
    )
    return Budget(dense, deploy, samples, batch, why)
