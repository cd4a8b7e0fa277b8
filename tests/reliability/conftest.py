"""Shared fixtures: one small on-disk dataset and one uninterrupted reference run to compare with."""
from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

from trainpilot.data import write_demo_dataset

# One configuration for every crash/signal test: ~270 steps per epoch (about a second on one
# thread), so a signal sent at "a step of epoch 2" lands mid-epoch, well before the run ends.
RUN = {"model": "mlp", "epochs": 3, "batch_size": 4, "seed": 5, "threads": 1}
RUN_ARGS = ["--model", "mlp", "--epochs", "3", "--batch-size", "4", "--seed", "5", "--backend", "cpu", "--threads", "1"]


@pytest.fixture(scope="session")
def small_dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_demo_dataset(tmp_path_factory.mktemp("data") / "demo1200", n=1200, seed=3)


@pytest.fixture(scope="session")
def reference_state(small_dataset: Path, tmp_path_factory: pytest.TempPathFactory) -> dict:
    """Weights and optimizer state of the same run done in one go, in this process, on one thread."""
    from trainpilot.session import SessionConfig, TrainingSession

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


def trainer_state(trainer) -> dict:
    """A private copy of a trainer's weights and optimizer state."""
    import copy

    return copy.deepcopy(trainer.state_dict())


def assert_same_state(actual: dict, expected: dict) -> None:
    """Exactly equal model weights and optimizer state (no tolerance: the CPU path is deterministic)."""
    assert actual["model_state"].keys() == expected["model_state"].keys()
    for name, tensor in expected["model_state"].items():
        assert torch.equal(actual["model_state"][name], tensor), f"weights differ: {name}"
    a_opt, e_opt = actual["optimizer_state"]["state"], expected["optimizer_state"]["state"]
    assert a_opt.keys() == e_opt.keys()
    for index, slots in e_opt.items():
        for slot, value in slots.items():
            assert torch.equal(torch.as_tensor(a_opt[index][slot]), torch.as_tensor(value)), f"optimizer state differs: {index}.{slot}"
