"""What runs where: a TrainPilot plan as the `TrainingArguments` fields that make a Hugging Face
Trainer run it, and back, the plan a Trainer with given arguments runs.

A single-process Trainer picks its device by availability (`TrainingArguments._setup_devices`): the
CPU only with `use_cpu=True`; otherwise MPS if there is one, else the other accelerators it knows
(XPU, NPU, ...), else `cuda:0`. So it runs the CPU plan, or the one accelerator it would pick: MPS
on a Mac, `cuda:0` on CUDA (another index needs CUDA_VISIBLE_DEVICES before CUDA starts, which
arguments cannot do). Mixed precision is Accelerate's autocast, as TrainPilot's is: bf16 on the CPU,
CUDA and MPS, fp16 on CUDA and MPS (Accelerate leaves an fp16 CPU run in fp32). `torch_compile`
compiles the model with inductor, as a compiled CPU plan does. The split and Core ML plans are
TrainPilot's own loops, and a Trainer does not put a model in channels_last: it cannot run those.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from trainpilot.hosted.plan_rows import best_row, cuda_index, plan_of_device
from trainpilot.plans import COMPILED, Plan

# The TrainingArguments fields TrainPilot decides (all of them, every time: a field left out would
# keep whatever the user's arguments said, which the plan did not predict)
DECIDED = (
    "use_cpu",
    "dataloader_num_workers",
    "dataloader_pin_memory",
    "dataloader_persistent_workers",
    "bf16",
    "fp16",
    "torch_compile",
)
_PRECISIONS = {"cpu": ("bf16",), "cuda": ("bf16", "fp16"), "mps": ("bf16", "fp16")}


def trainer_accelerator() -> str | None:
    """The accelerator a Trainer without `use_cpu` takes on this machine, in its own order ("mps",
    "cuda", another device type it knows, or None: it falls back to the CPU)."""
    import torch

    if torch.backends.mps.is_available():
        return "mps"
    for kind in ("xpu", "mlu", "musa", "npu", "hpu"):
        backend = getattr(torch, kind, None)
        available = getattr(backend, "is_available", None)
        try:
            if available is not None and available():
                return kind
        except Exception:  # a half-installed vendor backend: the Trainer's own probe would skip it too
            continue
    return "cuda" if torch.cuda.is_available() else None


def runnable(plan: Plan, accelerator: str | None = None) -> bool:
    """Whether a single-process Trainer runs `plan` as TrainPilot predicted it. `accelerator`: the
    one the Trainer would take (default: `trainer_accelerator()`)."""
    if plan.memory_format or plan.workers:
        return False
    if plan.precision and plan.precision not in _PRECISIONS.get(plan.backend, ()):
        return False
    if plan.backend == "cpu":
        return plan.mode is None or plan.is_compiled
    if plan.mode is not None:
        return False
    if plan.backend not in ("cuda", "mps"):
        return False
    taken = trainer_accelerator() if accelerator is None else accelerator
    if plan.backend != taken:
        return False
    return plan.backend == "mps" or cuda_index(plan.device) == 0


def training_arguments(plan: Plan, accelerator: str | None = None) -> dict[str, Any]:
    """`TrainingArguments(**training_arguments(plan))`: the fields in DECIDED that run `plan`."""
    if not runnable(plan, accelerator):
        raise ValueError(f"a Hugging Face Trainer cannot run the plan {plan.label}")
    workers = plan.loader_workers or 0
    return {
        "use_cpu": plan.backend == "cpu",
        "dataloader_num_workers": workers,
        # pinned pages speed host-to-GPU copies; the CPU has no copy and MPS does not pin
        "dataloader_pin_memory": plan.backend == "cuda",
        # TrainPilot's loaders keep their workers from one epoch to the next: the plan was predicted so
        "dataloader_persistent_workers": workers > 0,
        "bf16": plan.precision == "bf16",
        "fp16": plan.precision == "fp16",
        "torch_compile": plan.is_compiled,
    }


def plan_of_arguments(args: Any, threads: int) -> Plan:
    """The plan a Trainer with `args` (TrainingArguments, its device set up) runs, with the process's
    torch `threads`."""
    precision = "bf16" if args.bf16 else "fp16" if args.fp16 else None
    device = args.device
    compiled = bool(args.torch_compile) and getattr(device, "type", str(device)) == "cpu"
    return plan_of_device(
        device,
        threads,
        int(args.dataloader_num_workers or 0),
        precision=precision,
        mode=COMPILED if compiled else None,
    )


def best_runnable(
    rows: Sequence[dict[str, Any]], objective: str, accelerator: str | None = None
) -> dict[str, Any] | None:
    """The row a Trainer can run that is best by `objective` (None: no such row predicted)."""
    taken = trainer_accelerator() if accelerator is None else accelerator
    return best_row(rows, objective, lambda plan: runnable(plan, taken))
