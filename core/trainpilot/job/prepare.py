"""The one prepare step every consumer of a job shares: resolve the data, hold out the validation
split, build the model and profile it on one real batch — as a run will train it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from trainpilot.job.data import Dataset, resolve_dataset
from trainpilot.job.models import ModelSpec, build_model
from trainpilot.job.workload import WorkloadProfile, profile_model


def seed_everything(seed: int) -> None:
    import numpy as np
    import torch

    torch.manual_seed(seed)
    np.random.seed(seed % (2**32))


@dataclass(frozen=True)
class PreparedJob:
    spec: ModelSpec
    dataset: Dataset
    train_set: Dataset
    val_set: Dataset
    profile: WorkloadProfile  # counts the training split only: what the run's steps go through
    seed: int

    def fingerprint(self) -> dict[str, Any]:
        """What a checkpoint must match to be resumed on this data."""
        data = self.dataset
        return {"samples": len(data), "sample_shape": list(data.sample_shape), "num_classes": data.num_classes}

    def fresh_model(self) -> Any:
        """The model as the run starts it: built right after seeding, so every run of the same
        seed starts from the same weights (profiling consumed random numbers of its own)."""
        seed_everything(self.seed)
        return build_model(self.spec, self.dataset.sample_shape, self.dataset.num_classes)


def prepare_job(
    model: str | dict[str, Any],
    dataset: Any,
    *,
    epochs: int,
    batch_size: int,
    val_fraction: float = 0.1,
    seed: int = 0,
) -> PreparedJob:
    """`dataset`: a path, None or "demo" for the bundled set, or a loaded `data.Dataset`."""
    spec = ModelSpec.from_config(model)
    data = dataset if isinstance(dataset, Dataset) else resolve_dataset(dataset)
    train_set, val_set = data.split(val_fraction, seed)
    seed_everything(seed)
    module = build_model(spec, data.sample_shape, data.num_classes)
    profile = profile_model(
        module,
        data.sample_shape,
        data.num_classes,
        len(train_set),
        name=spec.name,
        batch_size=batch_size,
        epochs=epochs,
    )
    return PreparedJob(spec, data, train_set, val_set, profile, seed)
