"""A Lightning project keeps its LightningModule and its Trainer; TrainPilot picks the Trainer's
accelerator and devices, and its callback compares the predicted time with the actual one.

`trainpilot.lightning.choose(module, datamodule)` profiles the module's training_step on one real
batch and returns Trainer keyword arguments (accelerator, devices); `last_choice(module)` holds the
whole decision (plan, predicted time, DataLoader workers); `TrainPilotCallback()` records the run in
the history TrainPilot learns from. The model is a small MLP classifier (Rumelhart, Hinton
& Williams, 1986) on synthetic Gaussian clusters; nothing else here is TrainPilot-specific.

    pip install lightning
    python examples/lightning_module.py            # 3 epochs
    python examples/lightning_module.py --small    # a few seconds
"""

from __future__ import annotations

import argparse

import lightning as L
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset, random_split

import trainpilot.lightning


class ClusterData(L.LightningDataModule):
    """`samples` points in `features` dimensions around `classes` random centres, split 90/10."""

    def __init__(self, samples: int = 20000, features: int = 32, classes: int = 5, batch_size: int = 128):
        super().__init__()
        self.samples, self.features, self.classes, self.batch_size = samples, features, classes, batch_size
        self.workers = 0  # DataLoader worker processes

    def setup(self, stage: str | None = None) -> None:
        g = torch.Generator().manual_seed(0)
        centres = 0.4 * torch.randn(self.classes, self.features, generator=g)
        y = torch.randint(self.classes, (self.samples,), generator=g)
        X = centres[y] + torch.randn(self.samples, self.features, generator=g)
        n_val = self.samples // 10
        self.train_set, self.val_set = random_split(TensorDataset(X, y), [self.samples - n_val, n_val], generator=g)

    def train_dataloader(self) -> DataLoader:
        return DataLoader(
            self.train_set,
            batch_size=self.batch_size,
            shuffle=True,
            num_workers=self.workers,
            persistent_workers=self.workers > 0,
        )

    def val_dataloader(self) -> DataLoader:
        return DataLoader(self.val_set, batch_size=512)


class MLPClassifier(L.LightningModule):
    def __init__(self, features: int = 32, classes: int = 5, hidden: int = 256, lr: float = 1e-3):
        super().__init__()
        self.save_hyperparameters()
        self.net = nn.Sequential(
            nn.Linear(features, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, classes)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)

    def training_step(self, batch: tuple[torch.Tensor, torch.Tensor], batch_idx: int) -> torch.Tensor:
        x, y = batch
        loss = nn.functional.cross_entropy(self(x), y)
        self.log("train_loss", loss)
        return loss

    def validation_step(self, batch: tuple[torch.Tensor, torch.Tensor], batch_idx: int) -> None:
        x, y = batch
        logits = self(x)
        self.log("val_loss", nn.functional.cross_entropy(logits, y))
        self.log("val_acc", (logits.argmax(dim=1) == y).float().mean())

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.Adam(self.parameters(), lr=self.hparams.lr)


def train(samples: int = 20000, epochs: int = 3) -> dict[str, float]:
    """Train with the Trainer TrainPilot configures; returns the final metrics and TrainPilot's figures."""
    module, data = MLPClassifier(), ClusterData(samples=samples)
    arguments = trainpilot.lightning.choose(module, data, epochs=epochs)  # {"accelerator": ..., "devices": ...}
    choice = trainpilot.lightning.last_choice(module)
    print(f"plan: {choice.plan.label}, predicted {choice.predicted_s:.2f} s, confidence {choice.confidence:.2f}")
    data.workers = choice.loader_workers  # the dataloaders are ours to build: use the plan's worker count
    callback = trainpilot.lightning.TrainPilotCallback()
    trainer = L.Trainer(
        **arguments,
        max_epochs=epochs,
        callbacks=[callback],
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    )
    trainer.fit(module, datamodule=data)
    if callback.result:  # what the callback recorded: run_id, status, plan, predicted_s, actual_s
        done = callback.result
        print(f"status: {done['status']}, predicted {done['predicted_s']:.2f} s, actual {done['actual_s']:.2f} s")
    else:
        print("not recorded:", "; ".join(callback.notes))
    return {name: float(value) for name, value in trainer.callback_metrics.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--small", action="store_true", help="a tiny run (1000 samples, 1 epoch)")
    parser.add_argument("--epochs", type=int, default=3)
    args = parser.parse_args()
    samples, epochs = (1000, 1) if args.small else (20000, args.epochs)
    metrics = train(samples=samples, epochs=epochs)
    print("final metrics: " + ", ".join(f"{name} {value:.4f}" for name, value in sorted(metrics.items())))


if __name__ == "__main__":
    main()
