"""What the crash, signal and fault tests share besides fixtures: the one run they all make, and how
two runs' states are compared. A module of its own because tests import it by name, and `conftest`
is no name to import: every test folder has one, and which `conftest` module an import finds
depends on which folders pytest collected first."""
from __future__ import annotations

import torch

# One configuration for every crash/signal test: ~270 steps per epoch (about a second on one
# thread), so a signal sent at "a step of epoch 2" lands mid-epoch, well before the run ends.
RUN = {"model": "mlp", "epochs": 3, "batch_size": 4, "seed": 5, "threads": 1}
RUN_ARGS = ["--model", "mlp", "--epochs", "3", "--batch-size", "4", "--seed", "5", "--backend", "cpu", "--threads", "1"]


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
