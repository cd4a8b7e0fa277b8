"""The generic PyTorch training loop, one step at a time so the session can act between steps.

The trainer owns the model, the optimizer and the data order; a plan switch moves the weights and
the optimizer state to the new device without touching either, so training continues exactly
where it was. Epoch order is a permutation seeded by (seed, epoch): a run resumed from a
checkpoint sees the same batches as one that never stopped.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import nn

from trainpilot.backends import move_optimizer_state
from trainpilot.job.data import Dataset
from trainpilot.parallel.plan_backends import resolve_backend
from trainpilot.plans import Plan


@dataclass
class StepResult:
    epoch: int
    step: int  # 1-based index of the step just done within the epoch
    steps_per_epoch: int
    loss: float
    correct: int
    seen: int
    seconds: float


class Trainer:
    def __init__(
        self,
        model: nn.Module,
        train: Dataset,
        val: Dataset,
        *,
        batch_size: int,
        lr: float,
        seed: int,
        backends: Any = resolve_backend,
    ):
        self._backend = backends  # name -> Backend; a session may carry its own options (ANE --freeze)
        self.full_model = model
        self.model = model  # what trains now; a backend may narrow it (the ANE's head)
        self.train_set, self.val_set = train, val
        self.batch_size, self.seed = batch_size, seed
        self.optimizer = torch.optim.Adam(model.parameters(), lr=lr)
        self.loss_fn = nn.CrossEntropyLoss()
        self.plan: Plan | None = None
        self.device = torch.device("cpu")
        self._inputs: Any = train.X
        self._order: np.ndarray | None = None
        self._order_epoch = -1
        self._in_train_mode = False  # self.model's modules are in train mode (evaluation and plan switches clear it)
        self._runner: Any = None  # the plan's own forward+backward, when its backend has one

    @property
    def steps_per_epoch(self) -> int:
        return max(1, math.ceil(len(self.train_set) / self.batch_size))

    # ---------------------------------------------------------------- plans

    def use_plan(self, plan: Plan) -> None:
        """Make `plan` the one the next step runs on; weights and optimizer state follow."""
        backend = self._backend(plan.backend)
        backend.activate(plan)
        device = backend.device(plan)
        if self.plan is not None:
            self._backend(self.plan.backend).synchronize(self.plan)
        self.full_model.to(device)
        move_optimizer_state(self.optimizer, device)
        self.model, self._inputs = backend.adapt_job(self.full_model, self.train_set.X, plan)
        self.device, self.plan = device, plan
        self._in_train_mode = False
        if self._runner is not None:
            self._runner.close()
        self._runner = backend.step_runner(self.model, plan)  # None: this loop runs the step

    def synchronize(self) -> None:
        if self.plan is not None:
            self._backend(self.plan.backend).synchronize(self.plan)

    # ---------------------------------------------------------------- steps

    def epoch_order(self, epoch: int) -> np.ndarray:
        if self._order_epoch != epoch:
            self._order = np.random.default_rng([self.seed, epoch]).permutation(len(self.train_set))
            self._order_epoch = epoch
        assert self._order is not None
        return self._order

    def _batch(self, array: Any, idx: np.ndarray) -> torch.Tensor:
        return torch.as_tensor(np.asarray(array[idx]), dtype=torch.float32)

    def train_step(self, epoch: int, step: int) -> StepResult:
        """Run step `step` (0-based) of `epoch` and return what it did."""
        start = time.perf_counter()
        order = self.epoch_order(epoch)
        idx = order[step * self.batch_size : (step + 1) * self.batch_size]
        x = self._batch(self._inputs, idx).to(self.device, non_blocking=True)
        y = torch.as_tensor(self.train_set.y[idx]).to(self.device, non_blocking=True)
        if not self._in_train_mode:  # train() walks every module: once per epoch, not at every step
            self.model.train()
            self._in_train_mode = True
        self.optimizer.zero_grad(set_to_none=True)
        if self._runner is not None:
            logits, loss = self._runner.forward_backward(self.model, self.loss_fn, x, y)
        else:
            logits = self.model(x)
            loss = self.loss_fn(logits, y)
            loss.backward()
        self.optimizer.step()
        correct = int((logits.argmax(dim=1) == y).sum())  # .item() syncs the device: timings stay honest
        return StepResult(
            epoch, step + 1, self.steps_per_epoch, float(loss.detach()), correct, len(idx), time.perf_counter() - start
        )

    def evaluate(self) -> float | None:
        """Accuracy of the whole model on the held-out split (None when there is none)."""
        return self.accuracy_on(self.val_set)

    @torch.no_grad()
    def accuracy_on(self, data: Dataset) -> float | None:
        if len(data) == 0:
            return None
        model = self.full_model
        model.eval()
        self._in_train_mode = False
        correct = 0
        for start in range(0, len(data), 512):
            idx = np.arange(start, min(start + 512, len(data)))
            x = self._batch(data.X, idx).to(self.device)
            y = torch.as_tensor(data.y[idx]).to(self.device)
            correct += int((model(x).argmax(dim=1) == y).sum())
        return correct / len(data)

    # ---------------------------------------------------------------- state

    def state_dict(self) -> dict[str, Any]:
        return {
            "model_state": {k: v.detach().cpu() for k, v in self.full_model.state_dict().items()},
            "optimizer_state": _to_cpu(self.optimizer.state_dict()),
            "torch_rng": torch.get_rng_state(),
        }

    def snapshot(self) -> dict[str, Any]:
        """A private copy of the state (state_dict() on the CPU shares storage with the live model)."""
        return _clone(self.state_dict())

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.full_model.load_state_dict(state["model_state"])
        self.optimizer.load_state_dict(state["optimizer_state"])
        move_optimizer_state(self.optimizer, self.device)
        if isinstance(state.get("torch_rng"), torch.Tensor):
            torch.set_rng_state(state["torch_rng"])

    def restore_on_cpu(self, state: dict[str, Any]) -> None:
        """Put model, optimizer and RNG back to a snapshot, on the CPU, without reading the tensors
        they hold now: after a device fault those may be half-updated, or on a device that no
        longer answers. The parameters are replaced (assign=True), so the optimizer is rebuilt."""
        self.plan, self.device = None, torch.device("cpu")
        self.full_model.load_state_dict(_clone(state["model_state"]), assign=True)
        self.model, self._inputs = self.full_model, self.train_set.X
        self._in_train_mode = False
        self.optimizer = type(self.optimizer)(self.full_model.parameters(), **self.optimizer.defaults)
        self.optimizer.load_state_dict(_clone(state["optimizer_state"]))
        if isinstance(state.get("torch_rng"), torch.Tensor):
            torch.set_rng_state(state["torch_rng"])


def _clone(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return value.detach().to("cpu", copy=True)
    if isinstance(value, dict):
        return {k: _clone(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_clone(v) for v in value]
    return value


def _to_cpu(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return value.detach().cpu()
    if isinstance(value, dict):
        return {k: _to_cpu(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_to_cpu(v) for v in value]
    return value
