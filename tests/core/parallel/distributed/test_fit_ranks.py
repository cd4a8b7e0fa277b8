"""`trainpilot.fit(..., nproc=2)`: a job reference on two local ranks from Python, its model back."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

import trainpilot

from .ranked_job import make_job

JOB = f"{Path(__file__).with_name('ranked_job.py')}:make_job"


def test_fit_on_two_ranks_returns_the_trained_model(trainpilot_home: Path) -> None:
    ranks = trainpilot.fit(JOB, nproc=2, epochs=2, seed=3, adapt="off")
    assert ranks.ok and ranks.plan is not None and ranks.plan.mode == "ddp-2", ranks.data.get("message")
    assert ranks.data["distributed"]["weight_max_abs_diff_across_ranks"] == 0.0
    one = trainpilot.fit(JOB, epochs=2, seed=3, adapt="off", backend="cpu", threads=1)
    assert isinstance(ranks.model, torch.nn.Module)
    for (name, a), (_, b) in zip(ranks.model.state_dict().items(), one.model.state_dict().items()):
        assert float((a - b).abs().max()) <= 1e-5 * float(b.abs().max()), name


def test_a_job_object_cannot_go_to_ranks(trainpilot_home: Path) -> None:
    with pytest.raises(trainpilot.JobError, match="train.py:make_job"):
        trainpilot.fit(make_job(), nproc=2)
