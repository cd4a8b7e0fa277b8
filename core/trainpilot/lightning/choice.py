"""`choose`: the agent's decision for a LightningModule, as the Trainer arguments that run it.

The module becomes a TrainPilot Job whose step is its own `training_step` and whose optimizer is
the one `configure_optimizers` returns; the job is profiled on one real batch of the training
DataLoader and every plan is predicted, as `trainpilot.plan` does. The decision is remembered for
the module (weakly), so a `TrainPilotCallback` on the Trainer finds it.
"""

from __future__ import annotations

import re
import warnings
from dataclasses import dataclass, field, replace
from typing import Any

from trainpilot.errors import JobError
from trainpilot.hosted.decisions import Decisions
from trainpilot.job.spec import Job
from trainpilot.job.workload import WorkloadProfile
from trainpilot.lightning.mapping import best_runnable, runnable, trainer_arguments
from trainpilot.lightning.requirement import require_lightning
from trainpilot.plans import Plan
from trainpilot.units import seconds as seconds_text

# Lightning warns that `self.log()` has no Trainer when a training_step runs outside one: the profile's pass.
_NO_TRAINER_WARNING = re.escape("You are trying to `self.log()`")


@dataclass(frozen=True)
class Choice:
    """What the agent decided for a LightningModule.

    accelerator, devices: the Trainer arguments (`trainer_arguments()`).
    threads:        torch's intra-op threads, set in this process for a CPU plan (None otherwise).
    loader_workers: the DataLoader worker count the plan assumes (0: batches are loaded in the
                    training process). Lightning's dataloaders are yours to build: pass it as
                    `num_workers` where you build them; the run is predicted for the workers it uses.
    predicted_s:    the plan's predicted training time for `epochs` epochs of the profiled data.
    """

    plan: Plan
    accelerator: str
    devices: int | list[int]
    threads: int | None
    loader_workers: int
    predicted_s: float | None
    confidence: float | None
    epochs: int
    objective: str
    profile: WorkloadProfile
    trace: tuple[str, ...]  # the long form: the agent's every line (each plan's), then `notes`
    report: dict[str, Any] = field(repr=False, compare=False)  # trainpilot.plan's report: every plan's row
    notes: tuple[str, ...] = ()  # what Lightning adds to the agent's decision: its arguments, what it cannot run
    precision: str | None = None  # the mixed precision planned (the Trainer's own bf16-mixed/16-mixed), None: fp32

    def trainer_arguments(self) -> dict[str, Any]:
        devices = list(self.devices) if isinstance(self.devices, list) else self.devices
        return {"accelerator": self.accelerator, "devices": devices}

    def opening(self) -> list[str]:
        """The compact form of the trace: the decision, its table and reasons as `trainpilot headless
        run` opens with them (hosted/opening.py), then `notes`."""
        from trainpilot.hosted.opening import opening_lines

        summary = self.report.get("summary")
        head = opening_lines(summary) if summary else [line for line in self.trace if line.startswith("decision:")]
        return [*head, *self.notes]


_CHOICES: Decisions[Choice] = Decisions()


def last_choice(module: Any) -> Choice | None:
    """The last decision `choose` (or a `TrainPilotCallback` that planned itself) made for `module`."""
    return _CHOICES.last(module)


def remember(module: Any, choice: Choice) -> None:
    _CHOICES.remember(module, choice)


def choose(
    module: Any,
    datamodule: Any = None,
    *,
    train_dataloader: Any = None,
    epochs: int = 1,
    objective: str = "time",
) -> dict[str, Any]:
    """The Trainer arguments (`accelerator`, `devices`) of the plan the agent picks for `module`:

        trainer = lightning.Trainer(**choose(module, datamodule), callbacks=[TrainPilotCallback()], ...)

    Call it before the Trainer is built (Lightning resolves the accelerator in `Trainer.__init__`).
    For a CPU plan it sets torch's thread count in this process. The training data comes from
    `train_dataloader`, else `datamodule` (its `prepare_data()` and `setup("fit")` are called, and
    the Trainer calls them again), else the module's own `train_dataloader()`. Lightning's
    dataloaders are yours to build: the plan's DataLoader worker count is
    `last_choice(module).loader_workers`, which you pass as `num_workers` when you build them.

    A training_step that needs `self.trainer` cannot run before the Trainer exists: profiling it
    raises JobError; use `TrainPilotCallback` alone then (it plans at the start of training).
    `epochs`: how many epochs the prediction is for (the callback scales it to the fit's own).
    """
    import torch

    require_lightning()
    loader = train_loader(module, datamodule, train_dataloader)
    choice = plan_module(module, loader, epochs=epochs, objective=objective)
    if choice.threads:
        torch.set_num_threads(choice.threads)
    remember(module, choice)
    return choice.trainer_arguments()


def train_loader(module: Any, datamodule: Any = None, train_dataloader: Any = None) -> Any:
    """The training DataLoader the Trainer will use, built as it would be before the Trainer exists."""
    from torch.utils.data import DataLoader

    if train_dataloader is not None:
        loader = train_dataloader
    elif datamodule is not None:
        datamodule.prepare_data()
        datamodule.setup("fit")
        loader = datamodule.train_dataloader()
    elif _defines(module, "train_dataloader"):
        loader = module.train_dataloader()
    else:
        raise JobError(
            f"{type(module).__name__}: no training data to profile: give choose() a datamodule or train_dataloader="
        )
    if not isinstance(loader, DataLoader):
        raise JobError(
            f"{type(module).__name__}: TrainPilot profiles one training DataLoader, got {type(loader).__name__}"
            " (several loaders: pass the one that dominates as train_dataloader=)"
        )
    return loader


def _defines(module: Any, hook: str) -> bool:
    """Whether the module overrides Lightning's default hook (which only raises)."""
    pl = require_lightning()
    own = getattr(type(module), hook, None)
    return own is not None and own is not getattr(pl.LightningModule, hook, None)


def plan_module(
    module: Any, loader: Any, *, epochs: int, objective: str, model: Any = None, precision: str | None = None
) -> Choice:
    """Profile and plan `module` on `loader` (its batches, at its batch size). `model`: what to
    profile instead of a copy of the module (the callback passes a factory of a CPU copy of a module
    already on its device). `precision`: the mixed precision the Trainer autocasts in (None: fp32)."""
    from trainpilot.agent.planning import plan_job

    job = lightning_job(module, loader, model=model)
    # keeps the user's random state; PyTorch's layout, as the Trainer runs the module as written
    report = plan_job(
        "job",
        None,
        epochs=epochs,
        objective=objective,
        job=job,
        memory_format="contiguous",
        precision=precision or "fp32",
    )
    return choice_from(report, epochs=epochs, objective=objective, precision=precision)


def lightning_job(module: Any, loader: Any, *, model: Any = None) -> Job:
    """The Job a LightningModule trains as: its training_step on the loader's batches, its optimizer.
    The loader is its own validation data too, so planning holds nothing out: Lightning trains on all
    of it, and validation is not timed."""
    return Job(
        model if model is not None else module,
        loader,
        step=_training_step,
        optimizer=optimizer_factory(module),
        val_data=loader,
        name=type(module).__name__,
    )


def _training_step(model: Any, batch: Any) -> Any:
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=_NO_TRAINER_WARNING)
        return model.training_step(batch, 0)


def optimizer_factory(module: Any) -> Any:
    """`params -> optimizer`: the class and settings of the first optimizer the module's
    configure_optimizers returns (an optimizer, a list or tuple of them, `(optimizers, schedulers)`,
    a dict with "optimizer", or a list of such dicts). Called only when the job trains."""

    def make(params: Any) -> Any:
        first = first_optimizer(module.configure_optimizers())
        if first is None:
            raise JobError(f"{type(module).__name__}.configure_optimizers() returned no optimizer")
        return type(first)(params, **first.defaults)

    return make


def first_optimizer(configured: Any) -> Any:
    """The first torch optimizer in what configure_optimizers returned (None: there is none)."""
    import torch

    if isinstance(configured, torch.optim.Optimizer):
        return configured
    if isinstance(configured, dict):
        return first_optimizer(configured.get("optimizer"))
    if isinstance(configured, (list, tuple)) and configured:
        return first_optimizer(configured[0])
    return None


def choice_from(report: dict[str, Any], *, epochs: int, objective: str, precision: str | None = None) -> Choice:
    """The decision in `report` (trainpilot.plan's), moved to the best plan Lightning can run when
    the agent chose one of TrainPilot's own loops. `precision`: the Trainer's autocast (None: fp32)."""
    chosen = report["chosen"]
    plan = Plan.from_dict(chosen)
    predicted, confidence = chosen.get("predicted_s"), chosen.get("confidence")
    lines: list[str] = []  # Lightning's own lines, said in the long and the compact trace alike
    if not runnable(plan, precision):
        row = best_runnable(report["plans"], objective, precision)
        if row is not None:
            runner_up = Plan.from_dict(row)
            predicted, confidence = row.get("predicted_s"), None
        else:
            import torch

            runner_up, predicted, confidence = Plan("cpu", threads=torch.get_num_threads()), None, None
        lines.append(
            f"Lightning cannot run {plan.label} (a TrainPilot loop): the best plan a Trainer runs is"
            f" {runner_up.label}" + (f", predicted {seconds_text(predicted)}" if predicted is not None else "")
        )
        plan = runner_up
    args = trainer_arguments(plan)
    line = f"Lightning: Trainer(accelerator={args['accelerator']!r}, devices={args['devices']!r})"
    if plan.backend == "cpu" and plan.threads:
        line += f", torch.set_num_threads({plan.threads})"
    if plan.loader_workers:
        line += f"; the plan loads batches with DataLoader(num_workers={plan.loader_workers})"
    lines.append(line)
    profile = WorkloadProfile.from_dict(report["workload"])
    return Choice(
        plan=plan,
        accelerator=args["accelerator"],
        devices=args["devices"],
        threads=plan.threads if plan.backend == "cpu" else None,
        loader_workers=plan.loader_workers or 0,
        predicted_s=predicted,
        confidence=confidence,
        epochs=epochs,
        objective=objective,
        profile=replace(profile, epochs=epochs),
        trace=(*report.get("trace", ()), *lines),
        report=report,
        notes=tuple(lines),
        precision=precision,
    )
