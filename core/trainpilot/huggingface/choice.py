"""`choose`: the agent's decision for a Hugging Face model and training set, as the `TrainingArguments`
fields that run it.

The model becomes a TrainPilot Job whose step is what the Trainer's `compute_loss` does (the whole
collated batch into the model, the loss it returns) and whose optimizer is the one the Trainer's
arguments name, clipped as the Trainer clips; the job is profiled on one real batch collated by the
Trainer's collator and every plan is predicted, as `trainpilot.plan` does. The decision is remembered
for the model (weakly), so a `TrainPilotCallback` on the Trainer finds it.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field, replace
from typing import Any

from trainpilot.errors import JobError
from trainpilot.hosted.decisions import Decisions
from trainpilot.huggingface.mapping import best_runnable, runnable, trainer_accelerator, training_arguments
from trainpilot.huggingface.requirement import require_transformers
from trainpilot.job.objective import loss_of
from trainpilot.job.spec import Job
from trainpilot.job.workload import WorkloadProfile
from trainpilot.plans import Plan
from trainpilot.units import seconds as seconds_text

PRECISIONS = ("fp32", "auto", "bf16", "fp16")


@dataclass(frozen=True)
class Choice:
    """What the agent decided for a model and its training set.

    arguments:      the TrainingArguments fields (`training_arguments()`): mapping.DECIDED.
    threads:        torch's intra-op threads, set in this process for a CPU plan (None otherwise).
    loader_workers: the DataLoader worker count (`dataloader_num_workers`).
    predicted_s:    the plan's predicted training time for `epochs` epochs of the training set.
    precision:      the mixed precision the user allowed ("fp32": none).
    """

    plan: Plan
    arguments: dict[str, Any]
    threads: int | None
    loader_workers: int
    predicted_s: float | None
    confidence: float | None
    epochs: int
    objective: str
    precision: str
    profile: WorkloadProfile
    trace: tuple[str, ...]  # the long form: the agent's every line (each plan's), then `notes`
    report: dict[str, Any] = field(repr=False, compare=False)  # trainpilot.plan's report: every plan's row
    notes: tuple[str, ...] = ()  # what the Trainer adds to the agent's decision: its arguments, what it cannot run

    def training_arguments(self) -> dict[str, Any]:
        return dict(self.arguments)

    def opening(self) -> list[str]:
        """The compact form of the trace: the decision, its table and reasons as `trainpilot headless
        run` opens with them (hosted/opening.py), then `notes`."""
        from trainpilot.hosted.opening import opening_lines

        summary = self.report.get("summary")
        head = opening_lines(summary) if summary else [line for line in self.trace if line.startswith("decision:")]
        return [*head, *self.notes]


_CHOICES: Decisions[Choice] = Decisions()


def last_choice(model: Any) -> Choice | None:
    """The last decision `choose` (or a `TrainPilotCallback` that planned itself) made for `model`."""
    return _CHOICES.last(model)


def remember(model: Any, choice: Choice) -> None:
    _CHOICES.remember(model, choice)


def choose(
    model: Any,
    train_dataset: Any,
    *,
    args: Any = None,
    data_collator: Any = None,
    epochs: int | None = None,
    objective: str = "time",
    precision: str = "fp32",
    batch_size: int | None = None,
) -> dict[str, Any]:
    """The `TrainingArguments` fields of the plan the agent picks for `model` on `train_dataset`:

        args = TrainingArguments(output_dir="out", per_device_train_batch_size=64,
                                 **choose(model, train_dataset, batch_size=64))
        args = dataclasses.replace(args, **choose(model, train_dataset, args=args))  # arguments made already

    Call it before the Trainer is built (the arguments fix the device when they are made). For a CPU
    plan it sets torch's thread count in this process. `args`: the arguments the Trainer will get
    (their batch size, epochs, optimizer and gradient clipping are planned; without them, the
    TrainingArguments defaults). `batch_size`: the Trainer's `per_device_train_batch_size`, where
    `args` are not made yet. The step is profiled at the batch the Trainer trains only when one of
    the two says it: without either, choose() plans at TrainingArguments' default (8) and its trace
    says so; a `TrainPilotCallback` then profiles the Trainer's own batch when training starts.
    `data_collator`: the Trainer's (default: transformers' `default_data_collator`). `epochs`: what
    the prediction covers (default the arguments' `num_train_epochs`, rounded up). `precision`: what
    the run may use, fp32 (default) | auto | bf16 | fp16; mixed precision is chosen only where the
    device runs it natively; arguments that set bf16/fp16 themselves allow that precision. Returns
    use_cpu, dataloader_num_workers, dataloader_pin_memory, dataloader_persistent_workers, bf16, fp16
    and torch_compile.
    """
    import torch

    require_transformers()
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {', '.join(PRECISIONS)}, got {precision!r}")
    if epochs is not None and (isinstance(epochs, bool) or not isinstance(epochs, int) or epochs < 1):
        raise ValueError(f"epochs must be a whole number >= 1, got {epochs!r}")
    if batch_size is not None and (isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1):
        raise ValueError(f"batch_size must be a whole number >= 1, got {batch_size!r}")
    allowed, note = allowed_precision(args, precision)
    notes = [note] if note else []
    if args is None and batch_size is None:
        notes.append(
            f"planned at batch {setting(None, 'per_device_train_batch_size')}, TrainingArguments' default:"
            " choose(..., args=) or batch_size= plans the Trainer's own (TrainPilotCallback profiles it at its start)"
        )
    choice = plan_model(
        model,
        train_dataset,
        args=args,
        data_collator=data_collator,
        epochs=epochs if epochs is not None else planned_epochs(args),
        objective=objective,
        precision=allowed,
        notes=notes,
        batch_size=batch_size,
    )
    if choice.threads:
        torch.set_num_threads(choice.threads)
    remember(model, choice)
    return choice.training_arguments()


def allowed_precision(args: Any, precision: str) -> tuple[str, str | None]:
    """The precision the plan may use: `precision`, or the arguments' own bf16/fp16 where the user
    left `precision` at fp32 (they asked for it there already)."""
    if args is None or precision != "fp32":
        return precision, None
    own = "bf16" if setting(args, "bf16") else "fp16" if setting(args, "fp16") else None
    if own is None:
        return precision, None
    return own, f"the arguments set {own}=True: {own} is allowed where the device runs it natively"


def setting(args: Any, name: str) -> Any:
    """A TrainingArguments field: the user's, or the class default where no arguments were given."""
    if args is not None:
        return getattr(args, name)
    transformers = require_transformers()
    found = {f.name: f for f in dataclasses.fields(transformers.TrainingArguments)}[name]
    return found.default


def planned_epochs(args: Any) -> int:
    return max(int(math.ceil(float(setting(args, "num_train_epochs")))), 1)


def plan_model(
    model: Any,
    train_dataset: Any,
    *,
    args: Any,
    data_collator: Any,
    epochs: int,
    objective: str,
    precision: str,
    notes: list[str] | None = None,
    profiled: Any = None,
    batch_size: int | None = None,
) -> Choice:
    """Profile and plan `model` on `train_dataset` as a Trainer with `args` trains it, on batches of
    `batch_size` (default the arguments' `per_device_train_batch_size`). `profiled`: what to profile
    instead of a copy of the model (the callback passes a factory of a CPU copy of a model already on
    its device)."""
    from trainpilot.agent.planning import plan_job

    job = trainer_job(
        model, train_dataset, args=args, data_collator=data_collator, profiled=profiled, batch_size=batch_size
    )
    # keeps the user's random state; PyTorch's layout, as the Trainer runs the model as written
    report = plan_job(
        "job", None, epochs=epochs, objective=objective, job=job, memory_format="contiguous", precision=precision
    )
    return choice_from(report, epochs=epochs, objective=objective, precision=precision, notes=notes or [])


def trainer_job(
    model: Any,
    train_dataset: Any,
    *,
    args: Any,
    data_collator: Any,
    profiled: Any = None,
    batch_size: int | None = None,
) -> Job:
    """The Job a Trainer's training is: the collated batches of `train_dataset`, the model's own loss
    as `compute_loss` takes it, the arguments' optimizer. The training set is its own validation data
    too, so planning holds nothing out: the Trainer trains on all of it, and evaluation is not timed."""
    transformers = require_transformers()
    collator = data_collator if data_collator is not None else transformers.default_data_collator
    try:
        size = len(train_dataset)
    except TypeError:
        raise JobError(
            f"{type(model).__name__}: TrainPilot plans a training set with a length (a map-style Dataset),"
            f" got {type(train_dataset).__name__}"
        ) from None
    if size == 0:
        raise JobError(f"{type(model).__name__}: the training set is empty")
    return Job(
        profiled if profiled is not None else model,
        train_dataset,
        step=trainer_step,
        optimizer=optimizer_factory(args),
        batch_size=int(batch_size if batch_size is not None else setting(args, "per_device_train_batch_size")),
        collate_fn=collator,
        val_data=train_dataset,
        name=type(model).__name__,
    )


def trainer_step(model: Any, batch: Any) -> Any:
    """What the Trainer's `compute_loss` does with a batch: every key into the model, the loss it
    returns (a ModelOutput's `loss`, a dict's "loss", else its first item)."""
    from collections.abc import Mapping

    if not isinstance(batch, Mapping):
        raise JobError(
            f"the Trainer passes a batch to the model as keyword arguments: the collator must return a dict,"
            f" got {type(batch).__name__}"
        )
    output = model(**batch)
    loss = loss_of(output)
    if loss is None and isinstance(output, (tuple, list)) and output:
        loss = output[0]
    if loss is None:
        raise JobError(
            f"{type(model).__name__} returned no loss on a batch with keys {', '.join(map(str, batch))}:"
            " the Trainer needs one (give the batch its labels, or the Trainer a compute_loss_func)"
        )
    return loss


def optimizer_factory(args: Any) -> Any:
    """`params -> optimizer`: the class and settings the Trainer takes from `args` (its own
    `get_optimizer_cls_and_kwargs`), clipping gradients to `max_grad_norm` before each step as the
    Trainer does, so the profiled step costs what the Trainer's does."""
    transformers = require_transformers()
    max_norm = float(setting(args, "max_grad_norm") or 0.0)
    weight_decay = float(setting(args, "weight_decay") or 0.0)

    def make(params: Any) -> Any:
        import torch

        used = args if args is not None else default_arguments()
        optimizer_cls, kwargs = transformers.Trainer.get_optimizer_cls_and_kwargs(used)
        params = [p for p in params if p.requires_grad]
        optimizer = optimizer_cls(params, **{"weight_decay": weight_decay, **kwargs})
        if max_norm > 0:
            step = optimizer.step

            def clipped_step(closure: Any = None) -> Any:
                torch.nn.utils.clip_grad_norm_(params, max_norm)
                return step(closure)

            optimizer.step = clipped_step
        return optimizer

    return make


def default_arguments() -> Any:
    """TrainingArguments as a Trainer without any would make them (its optimizer is the question)."""
    import tempfile

    transformers = require_transformers()
    return transformers.TrainingArguments(output_dir=tempfile.gettempdir(), report_to="none")


def choice_from(
    report: dict[str, Any],
    *,
    epochs: int,
    objective: str,
    precision: str = "fp32",
    notes: list[str] | None = None,
    accelerator: str | None = None,
) -> Choice:
    """The decision in `report` (trainpilot.plan's), moved to the best plan a Trainer can run when
    the agent chose one of TrainPilot's own loops. `accelerator`: the one a Trainer takes here
    (default: mapping.trainer_accelerator())."""
    import torch

    taken = trainer_accelerator() if accelerator is None else accelerator
    chosen = report["chosen"]
    plan = Plan.from_dict(chosen)
    predicted, confidence = chosen.get("predicted_s"), chosen.get("confidence")
    lines = list(notes or [])  # the Trainer's own lines, said in the long and the compact trace alike
    if not runnable(plan, taken):
        row = best_runnable(report["plans"], objective, taken)
        if row is not None:
            runner_up = Plan.from_dict(row)
            predicted, confidence = row.get("predicted_s"), None
        else:
            runner_up, predicted, confidence = Plan("cpu", threads=torch.get_num_threads()), None, None
        lines.append(
            f"a Hugging Face Trainer cannot run {plan.label}: the best plan it runs is {runner_up.label}"
            + (f", predicted {seconds_text(predicted)}" if predicted is not None else "")
        )
        plan = runner_up
    arguments = training_arguments(plan, taken)
    lines.append(arguments_line(arguments, plan))
    if plan.is_compiled:
        lines.append("torch_compile: the compile is predicted to pay for itself within these epochs")
    if plan.backend == "cuda" and torch.cuda.device_count() > 1:
        lines.append(
            f"this machine has {torch.cuda.device_count()} CUDA devices: a Trainer uses all of them"
            " (nn.DataParallel) unless CUDA_VISIBLE_DEVICES=0 is set before it starts; the plan is for one"
        )
    profile = WorkloadProfile.from_dict(report["workload"])
    return Choice(
        plan=plan,
        arguments=arguments,
        threads=plan.threads if plan.backend == "cpu" else None,
        loader_workers=plan.loader_workers or 0,
        predicted_s=predicted,
        confidence=confidence,
        epochs=epochs,
        objective=objective,
        precision=precision,
        profile=replace(profile, epochs=epochs),
        trace=(*report.get("trace", ()), *lines),
        report=report,
        notes=tuple(lines),
    )


def arguments_line(arguments: dict[str, Any], plan: Plan) -> str:
    """'Hugging Face: TrainingArguments(use_cpu=True, dataloader_num_workers=0; the other 5 decided
    fields False), torch.set_num_threads(2)': what was set, and the switches left off counted."""
    said = [f"{k}={v!r}" for k, v in arguments.items() if v is not False]
    off = len(arguments) - len(said)
    line = "Hugging Face: TrainingArguments(" + ", ".join(said)
    line += f"; the other {off} decided fields False)" if off else ")"
    if plan.backend == "cpu" and plan.threads:
        line += f", torch.set_num_threads({plan.threads})"
    return line
