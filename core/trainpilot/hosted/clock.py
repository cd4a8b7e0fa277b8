"""The training clock of a loop TrainPilot does not own (a Lightning fit, a Hugging Face Trainer):
wall time from each training epoch's start to its end, less what the host runs inside the epoch that
is not training (validation, checkpoints). It runs through data loading, the steps and the optimizer,
as a TrainPilot run's epoch time does. Queued accelerator work is waited for before the clock stops."""

from __future__ import annotations

import time
from typing import Any


def synchronize(device: Any) -> None:
    """Wait for the work queued on a CUDA or MPS device (the host runs ahead of it)."""
    import torch

    kind = getattr(device, "type", str(device))
    if kind == "cuda":
        torch.cuda.synchronize(device)
    elif kind == "mps":
        torch.mps.synchronize()


class TrainClock:
    def __init__(self) -> None:
        self.seconds = 0.0  # training time so far
        self.steps = 0  # training batches done
        self.epochs = 0  # training epochs ended
        self._since: float | None = None

    @property
    def running(self) -> bool:
        return self._since is not None

    def start(self) -> None:
        if self._since is None:
            self._since = time.perf_counter()

    def stop(self, device: Any = None) -> None:
        if self._since is None:
            return
        if device is not None:
            synchronize(device)
        self.seconds += time.perf_counter() - self._since
        self._since = None
