"""The generic PyTorch training loop, one step at a time so the session can act between steps.

The trainer owns the model, the optimizer and the data order; a plan switch moves the weights and
the optimizer state to the new device without touching either, so training continues exactly
where it was. Epoch order is a permutation seeded by (seed, epoch): a run resumed from a
checkpoint sees the same batches as one that never stopped.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import nn

from trainpilot.backends import move_optimizer_state
from trainpilot.parallel.plan_backends import resolve_backend
from trainpilot.plans import Plan


@dataclass
class StepResult:
    epoch: int
    step: int  # 1-based index of the step just done within the epoch
    steps_per_epoch: int
    loss: float
    correct: float  # the metric summed over the batch's samples (accuracy: samples right); 0 without one
    seen: int
    seconds: float


def _zoo_objective() -> Any:
    from trainpilot.job.objective import Objective, accuracy

    return Objective(nn.functional.cross_entropy, None, accuracy, "cross-entropy", "accuracy")


class Trainer:
    def __init__(
        self,
        model: nn.Module,
        train: Any,
        val: Any,
        *,
        batch_size: int,
        lr: float,
        seed: int,
        backends: Any = resolve_backend,
        objective: Any = None,
        optimizer: Any = None,
        scheduler: Any = None,
        shuffle: bool = True,
        loss_reduction: str = "mean",
    ):
        self._backend = backends  # name -> Backend; a session may carry its own options (ANE --freeze)
        self.full_model = model
        self.model = model  # what trains now; a backend may narrow it (the ANE's head)
        self.train_set, self.val_set = train, val
        self.batch_size, self.seed, self.shuffle = batch_size, seed, shuffle
        self.objective = objective or _zoo_objective()  # batch -> (loss, output, target): job/objective.py
        self.loss_reduction = loss_reduction  # the job's loss over a batch: mean or sum (Job.loss_reduction)
        self._make_optimizer = optimizer or (lambda params: torch.optim.Adam(params, lr=lr))
        self.optimizer = self._new_optimizer()
        self._make_scheduler = scheduler
        self.scheduler = scheduler(self.optimizer) if scheduler is not None else None
        self.plan: Plan | None = None
        self.device = torch.device("cpu")
        self._inputs: Any = getattr(train, "X", None)
        self._order: np.ndarray | None = None
        self._order_epoch = -1
        self._in_train_mode = False  # self.model's modules are in train mode (evaluation and plan switches clear it)
        self._runner: Any = None  # the plan's own forward+backward, when its backend has one
        self._stream: tuple[int, int, Iterator[Any]] | None = None  # (epoch, next step, batches) from workers
        self.last_val_loss: float | None = None
        # the memory format the weights are in now (None: PyTorch's default); "" unknown, as for a
        # user's model, which may come in either: the first plan converts it to its own
        self._layout: str | None = ""
        self._scaler: Any = None  # fp16's gradient scaler (job/precision.py), while an fp16 plan runs
        self._scaler_state: dict[str, Any] | None = None  # a checkpoint's, for the next fp16 plan's scaler

    def _new_optimizer(self) -> torch.optim.Optimizer:
        from trainpilot.errors import JobError

        optimizer = self._make_optimizer(self.full_model.parameters())
        if not isinstance(optimizer, torch.optim.Optimizer):
            raise JobError(f"the optimizer factory returned {type(optimizer).__name__}, not a torch.optim.Optimizer")
        return optimizer

    @property
    def has_metric(self) -> bool:
        return bool(self.objective.has_metric)

    @property
    def loader_workers(self) -> int:
        return int(self.plan.loader_workers or 0) if self.plan is not None else 0

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
        self._use_settings(plan, device)
        self.model, self._inputs = backend.adapt_job(self.full_model, getattr(self.train_set, "X", None), plan)
        self.device, self.plan = device, plan
        self._in_train_mode = False
        self._stream = None  # the next batch comes from loaders of the new plan's worker count
        self.close_loaders()
        if self._runner is not None:
            self._runner.close()
        self._runner = backend.step_runner(self.model, plan)  # None: this loop runs the step

    def _use_settings(self, plan: Plan, device: torch.device) -> None:
        """The plan's layout and precision: weights and optimizer state converted when the layout
        changes (same values, other strides), and a gradient scaler kept across fp16 plans."""
        from trainpilot.job.layout import model_to_layout, optimizer_to_layout
        from trainpilot.job.precision import grad_scaler

        if plan.memory_format != self._layout:
            model_to_layout(self.full_model, plan.memory_format)
            optimizer_to_layout(self.optimizer, plan.memory_format)
            self._layout = plan.memory_format
        if plan.precision != "fp16" or plan.workers:  # a split's runner computes its own, unscaled gradients
            self._scaler = None
        elif self._scaler is None or self.device.type != device.type:
            self._scaler = grad_scaler(device, plan.precision)
            if self._scaler is not None and self._scaler_state is not None:
                self._scaler.load_state_dict(self._scaler_state)  # the scale a resumed run had reached
        self._scaler_state = None

    def autocast(self) -> Any:
        """The context a step's forward and loss run in: the plan's mixed precision, or nothing."""
        from trainpilot.job.precision import autocast

        return autocast(self.device, self.plan.precision if self.plan is not None else None)

    def _count_workers(self, data: Any) -> None:
        """A loader's worker processes: their CPU is this run's, not load it meets."""
        if self.loader_workers:
            from trainpilot.machine.contention import count_as_work

            count_as_work(data.worker_pids())

    def close_loaders(self) -> None:
        """End any DataLoader workers the data sets keep (persistent between epochs)."""
        for data in (self.train_set, self.val_set):
            if hasattr(data, "close"):
                data.close()

    def synchronize(self) -> None:
        if self.plan is not None:
            self._backend(self.plan.backend).synchronize(self.plan)

    # ---------------------------------------------------------------- steps

    def epoch_order(self, epoch: int) -> np.ndarray:
        if self._order_epoch != epoch:
            sampled = (
                self.train_set.sampled_order(self.seed, epoch) if hasattr(self.train_set, "sampled_order") else None
            )
            if sampled is not None:
                self._order = sampled
            elif self.shuffle:
                self._order = np.random.default_rng([self.seed, epoch]).permutation(len(self.train_set))
            else:
                self._order = np.arange(len(self.train_set))
            self._order_epoch = epoch
        assert self._order is not None
        return self._order

    def _batch(self, array: Any, idx: np.ndarray) -> torch.Tensor:
        return torch.as_tensor(np.asarray(array[idx]), dtype=torch.float32)

    def _fetch(self, epoch: int, step: int, idx: np.ndarray) -> Any:
        """Step `step`'s batch: indexed from memory, or the next one the epoch's loader delivers."""
        data = self.train_set
        if getattr(data, "in_memory", True):
            if self._inputs is not None and self._inputs is not getattr(data, "X", None):  # a backend's own inputs
                return self._batch(self._inputs, idx), torch.as_tensor(data.y[idx])
            return data.batch(idx)
        if self._stream is None or self._stream[:2] != (epoch, step):
            self._stream = None  # an earlier iterator is dropped before the loader is pointed elsewhere
            batches = self.epoch_batches(epoch, step)
            pin = self.device.type == "cuda"
            self._stream = (epoch, step, data.loader(batches, self.loader_workers, pin_memory=pin))
            self._count_workers(data)
        batch = next(self._stream[2])
        self._stream = (epoch, step + 1, self._stream[2])
        if step + 1 >= self.steps_per_epoch:
            self._stream = None  # the epoch's last batch: its iterator is done (the workers persist)
        return batch

    def epoch_batches(self, epoch: int, step: int) -> list[np.ndarray]:
        """The sample indices of `epoch`'s steps from `step` on, as this process loads them."""
        order = self.epoch_order(epoch)
        starts = range(step * self.batch_size, len(order), self.batch_size)
        return [order[s : s + self.batch_size] for s in starts]

    def train_step(self, epoch: int, step: int) -> StepResult:
        """Run step `step` (0-based) of `epoch` and return what it did."""
        from trainpilot.job.layout import batch_to_layout
        from trainpilot.job.objective import batch_size_of, to_device

        start = time.perf_counter()
        order = self.epoch_order(epoch)
        idx = order[step * self.batch_size : (step + 1) * self.batch_size]
        batch = batch_to_layout(to_device(self._fetch(epoch, step, idx), self.device, non_blocking=True), self._layout)
        if not self._in_train_mode:  # train() walks every module: once per epoch, not at every step
            self.model.train()
            self._in_train_mode = True
        self.optimizer.zero_grad(set_to_none=True)
        if self._runner is not None:  # a split plan: the batch shared among its workers (split_backend.py)
            loss, output, target = self._runner.forward_backward(self.model, self.objective, batch, self.loss_reduction)
        else:
            with self.autocast():
                loss, output, target = self.objective(self.model, batch)
            if self._scaler is not None:
                self._scaler.scale(loss).backward()
            else:
                loss.backward()
        if self._scaler is not None:
            self._scaler.step(self.optimizer)
            self._scaler.update()
        else:
            self.optimizer.step()
        seen = batch_size_of(batch) or len(idx)
        metric = self.objective.metric(output, target)  # .item() syncs the device: timings stay honest
        loss_value = float(loss.detach())
        return StepResult(
            epoch,
            step + 1,
            self.steps_per_epoch,
            loss_value,
            (metric or 0.0) * seen,
            seen,
            time.perf_counter() - start,
        )

    def end_epoch(self) -> None:
        """An epoch is over: the LR scheduler, when the job has one, steps."""
        if self.scheduler is not None:
            self.scheduler.step()

    def evaluate(self) -> float | None:
        """The metric of the whole model on the held-out split (None when there is none, or no
        metric: then `last_val_loss` is what validation measured)."""
        return self.accuracy_on(self.val_set)

    def accuracy_on(self, data: Any) -> float | None:
        """The job's metric on `data` (accuracy for the zoo); sets `last_val_loss` as well."""
        self.last_val_loss = None
        if len(data) == 0:
            return None
        return self._from_sums(*self.validation_sums(data))

    def _from_sums(self, loss_sum: float, metric_sum: float, seen: float) -> float | None:
        """The figures of summed (loss, metric, samples): `last_val_loss` set, the metric returned."""
        self.last_val_loss = loss_sum / max(seen, 1)
        return metric_sum / max(seen, 1) if self.has_metric else None

    @torch.no_grad()
    def validation_sums(self, data: Any) -> tuple[float, float, float]:
        """The job's loss and metric summed over `data`'s samples, and their count."""
        from trainpilot.job.layout import batch_to_layout
        from trainpilot.job.objective import batch_size_of, to_device

        model = self.full_model
        model.eval()
        self._in_train_mode = False
        metric_sum, loss_sum, seen = 0.0, 0.0, 0
        chunk = 512 if getattr(data, "in_memory", True) else self.batch_size
        batches = [np.arange(s, min(s + chunk, len(data))) for s in range(0, len(data), chunk)]
        if getattr(data, "in_memory", True):
            stream: Iterator[Any] = (data.batch(b) for b in batches)
        else:
            stream = data.loader(batches, self.loader_workers, pin_memory=self.device.type == "cuda")
            self._count_workers(data)
        for batch in stream:
            batch = batch_to_layout(to_device(batch, self.device), self._layout)
            with self.autocast():
                loss, output, target = self.objective(model, batch)
            n = batch_size_of(batch)
            loss_sum += float(loss) * (n if self.loss_reduction == "mean" else 1)  # per sample, either way
            metric_sum += (self.objective.metric(output, target) or 0.0) * n
            seen += n
        return loss_sum, metric_sum, float(seen)

    # ---------------------------------------------------------------- state

    def state_dict(self) -> dict[str, Any]:
        return {
            "model_state": {k: v.detach().cpu() for k, v in self.full_model.state_dict().items()},
            "optimizer_state": _to_cpu(self.optimizer.state_dict()),
            "torch_rng": torch.get_rng_state(),
            **({"scheduler_state": self.scheduler.state_dict()} if self.scheduler is not None else {}),
            **({"grad_scaler_state": self._scaler.state_dict()} if self._scaler is not None else {}),
        }

    def snapshot(self) -> dict[str, Any]:
        """A private copy of the state (state_dict() on the CPU shares storage with the live model)."""
        return _clone(self.state_dict())

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.full_model.load_state_dict(state["model_state"])
        self.optimizer.load_state_dict(state["optimizer_state"])
        move_optimizer_state(self.optimizer, self.device)
        if self._layout != "":  # the checkpoint's tensors come back in their saved strides
            from trainpilot.job.layout import model_to_layout, optimizer_to_layout

            model_to_layout(self.full_model, self._layout)
            optimizer_to_layout(self.optimizer, self._layout)
        self._load_scaler(state)
        if self.scheduler is not None and "scheduler_state" in state:
            self.scheduler.load_state_dict(state["scheduler_state"])
        if isinstance(state.get("torch_rng"), torch.Tensor):
            torch.set_rng_state(state["torch_rng"])

    def _load_scaler(self, state: dict[str, Any]) -> None:
        """fp16's loss scale from a checkpoint: into the scaler now, or into the next fp16 plan's."""
        saved = state.get("grad_scaler_state")
        if saved is None:
            return
        if self._scaler is not None:
            self._scaler.load_state_dict(saved)
        else:
            self._scaler_state = saved

    def restore_on_cpu(self, state: dict[str, Any]) -> None:
        """Put model, optimizer and RNG back to a snapshot, on the CPU, without reading the tensors
        they hold now: after a device fault those may be half-updated, or on a device that no
        longer answers. The parameters are replaced (assign=True), so the optimizer is rebuilt."""
        self.plan, self.device = None, torch.device("cpu")
        # assign=True takes the snapshot's tensors in whatever layout they were saved: "" makes the next plan convert
        self._layout, self._scaler = "", None
        self._load_scaler(state)
        self.full_model.load_state_dict(_clone(state["model_state"]), assign=True)
        self.model, self._inputs = self.full_model, getattr(self.train_set, "X", None)
        self._in_train_mode = False
        self._stream = None
        self.optimizer = self._new_optimizer()
        self.optimizer.load_state_dict(_clone(state["optimizer_state"]))
        if self._make_scheduler is not None:
            self.scheduler = self._make_scheduler(self.optimizer)
            if "scheduler_state" in state:
                self.scheduler.load_state_dict(_clone(state["scheduler_state"]))
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
