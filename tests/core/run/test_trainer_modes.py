"""The trainer puts the model in train mode once per epoch, not at every step (Module.train walks
every module: a measurable share of a small model's step), and never trains in eval mode."""
from __future__ import annotations

import torch

from trainpilot.job.data import demo_dataset, validate
from trainpilot.plans import Plan
from trainpilot.run.trainer import Trainer


class Counted(torch.nn.Module):
    """A small model with dropout (train and eval differ) that counts calls to train(True)."""

    def __init__(self) -> None:
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(28 * 28, 16), torch.nn.Dropout(0.5), torch.nn.Linear(16, 10))
        self.train_calls = 0
        self.modes: list[bool] = []

    def train(self, mode: bool = True):  # type: ignore[override]
        self.train_calls += int(mode)
        return super().train(mode)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.modes.append(self.net[2].training)
        return self.net(x)


def test_train_mode_is_set_once_per_epoch_and_restored_after_evaluation():
    full = demo_dataset(n=200)
    train, val = validate(full.X, full.y, "demo").split(0.2, seed=0)
    model = Counted()
    trainer = Trainer(model, train, val, batch_size=16, lr=1e-3, seed=0)
    trainer.use_plan(Plan("cpu", threads=1))
    for epoch in range(2):
        for step in range(trainer.steps_per_epoch):
            trainer.train_step(epoch, step)
        trainer.evaluate()
    assert model.train_calls == 2  # once per epoch, after the evaluation put it in eval mode
    trained = [mode for mode in model.modes if mode]
    assert len(trained) == 2 * trainer.steps_per_epoch  # every training step ran with dropout on
    trainer.use_plan(Plan("cpu", threads=1))  # a plan switch may hand back another module: set it again
    trainer.train_step(2, 0)
    assert model.train_calls == 3 and model.modes[-1]
