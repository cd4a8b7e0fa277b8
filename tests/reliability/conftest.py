"""Shared fixtures: one small on-disk dataset and one uninterrupted reference run to compare with."""
from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

from reliability_run import RUN, trainer_state
from trainpilot.job.data import write_demo_dataset


@pytest.fixture(scope="session")
def small_dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_demo_dataset(tmp_path_factory.mktemp("data") / "demo1200", n=1200, seed=3)


@pytest.fixture(scope="session")
def reference_state(small_dataset: Path, tmp_path_factory: pytest.TempPathFactory) -> dict:
    """Weights and optimizer state of the same run done in one go, in this process, on one thread."""
    from trainpilot.run.session import SessionConfig, TrainingSession

    home = tmp_path_factory.mktemp("reference-home")
    previous_home, previous_threads = os.environ.get("TRAINPILOT_HOME"), torch.get_num_threads()
    os.environ["TRAINPILOT_HOME"] = str(home)
    try:
        config = SessionConfig(dataset=str(small_dataset), backend="cpu", record_history=False, **RUN)
        session = TrainingSession(config)
        for _ in session.events():
            pass
        assert session.finished is not None and session.finished.status == "success", session.finished
        return trainer_state(session.trainer)
    finally:
        torch.set_num_threads(previous_threads)
        if previous_home is None:
            os.environ.pop("TRAINPILOT_HOME", None)
        else:
            os.environ["TRAINPILOT_HOME"] = previous_home
