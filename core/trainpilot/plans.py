"""A plan is one concrete way to run a training job: a backend plus the settings that matter for speed."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from typing import Any

COMPILED = "compiled"  # Plan.mode of a CPU plan that trains through torch.compile (backends/compiled.py)
# A split plan runs every batch on several workers at once (hetero/): backend SPLIT, and its
# workers spelled in `mode` ("cpu:1+cpu:1", "cuda:0+cpu:1"), so the history, checkpoints and
# --json store it in the same four fields as every other plan.
SPLIT = "split"
# A plan's layout (the same math in other strides) and precision (mixed precision: autocast, which
# rounds differently, so only where the user allows it). None is PyTorch's default for each:
# the contiguous (NCHW) layout and fp32.
CHANNELS_LAST = "channels_last"


def settings_key(memory_format: str | None, precision: str | None) -> str:
    """ "channels_last", "bf16", "channels_last+bf16": a variant of PyTorch's default step."""
    return "+".join(s for s in (memory_format, precision) if s)


def _worker_token(plan: Plan) -> str:
    if plan.backend == "cpu":
        return f"cpu:{plan.threads or 1}"
    return plan.device or plan.backend


def _worker_plan(token: str) -> Plan:
    name, _, rest = token.partition(":")
    if name == "cpu":
        return Plan("cpu", threads=int(rest or 1))
    return Plan(name, device=token)


@dataclass(frozen=True)
class Plan:
    backend: str  # "cpu" | "ane" | "mps" | "cuda" | "split"
    threads: int | None = None  # CPU intra-op threads; None for accelerators (host threads left as is)
    device: str | None = None  # torch device string for accelerators, e.g. "cuda:0"
    mode: str | None = None  # backend-specific mode, e.g. the ANE's "frozen-backbone"
    # DataLoader worker processes that load batches beside the training (None: the training
    # process loads them itself). A plan setting only for a job whose data is a Dataset.
    loader_workers: int | None = None
    memory_format: str | None = None  # CHANNELS_LAST for 4-D convolution inputs; None: contiguous
    precision: str | None = None  # "bf16" | "fp16" autocast; None: fp32

    @property
    def settings_key(self) -> str:
        """How probes and calibration name the plan's layout and precision ("" for the defaults)."""
        return settings_key(self.memory_format, self.precision)

    @property
    def is_eager_cpu(self) -> bool:
        """PyTorch on the host as written: the plan every other one falls back to when it fails."""
        return self.backend == "cpu" and self.mode is None

    @property
    def is_last_resort(self) -> bool:
        """Eager CPU loading its own batches, in PyTorch's default layout and precision: what any
        other plan falls back to when it fails (a device, compiling, a DataLoader worker, a
        layout or precision); its own failure is a bug or bad input."""
        return self.is_eager_cpu and not self.loader_workers and not self.memory_format and not self.precision

    @property
    def is_compiled(self) -> bool:
        return self.backend == "cpu" and self.mode == COMPILED

    def as_eager(self) -> Plan:
        """The same CPU plan without torch.compile: what a compiled plan's steps start from."""
        return Plan(
            "cpu",
            threads=self.threads,
            loader_workers=self.loader_workers,
            memory_format=self.memory_format,
            precision=self.precision,
        )

    def computing(self) -> Plan:
        """The plan without its data-loading setting: what the calibrated step measures."""
        return replace(self, loader_workers=None) if self.loader_workers is not None else self

    def with_loader(self, workers: int | None) -> Plan:
        return replace(self, loader_workers=workers)

    def with_settings(self, memory_format: str | None = None, precision: str | None = None) -> Plan:
        """The plan in another layout or precision (the defaults spelled as None)."""
        return replace(
            self,
            memory_format=None if memory_format in (None, "contiguous") else memory_format,
            precision=None if precision in (None, "fp32") else precision,
        )

    def default_settings(self) -> Plan:
        """The same plan in PyTorch's default layout and precision: what calibration measures."""
        return self.with_settings() if self.memory_format or self.precision else self

    @property
    def workers(self) -> tuple[Plan, ...]:
        """The plans a split plan's workers run (one batch shared among them); () for any other plan."""
        if self.backend != SPLIT or not self.mode:
            return ()
        # each worker runs the split's layout and precision on its share
        return tuple(_worker_plan(t).with_settings(self.memory_format, self.precision) for t in self.mode.split("+"))

    @classmethod
    def split(cls, workers: tuple[Plan, ...] | list[Plan]) -> Plan:
        return cls(SPLIT, mode="+".join(_worker_token(w) for w in workers))

    @property
    def label(self) -> str:
        if self.workers:
            settings = ", ".join(s for s in (self.memory_format, self.precision) if s)
            shares = " + ".join(_worker_plan(t).label for t in (self.mode or "").split("+"))
            return f"{SPLIT}: {shares}" + (f" ({settings})" if settings else "")
        parts = [self.backend]
        if self.threads:
            parts.append(f"{self.threads} thread" + ("s" if self.threads != 1 else ""))
        if self.device and self.device not in (self.backend, f"{self.backend}:0"):
            parts.append(self.device)
        if self.mode:
            parts.append(self.mode)
        if self.memory_format:
            parts.append(self.memory_format)
        if self.precision:
            parts.append(self.precision)
        if self.loader_workers:
            parts.append(f"{self.loader_workers} loader worker" + ("s" if self.loader_workers != 1 else ""))
        return parts[0] if len(parts) == 1 else f"{parts[0]} ({', '.join(parts[1:])})"

    @property
    def short_label(self) -> str:
        """The plan as a person reads it in a table, a trace line or a panel: 'cpu×2',
        'cpu×1 · cl · bf16', 'split 1+1 · cl', 'cpu×2 · compiled · 2 loaders', 'cuda:0 · bf16'
        (cl: channels_last). `label` is the long form --json and --verbose keep."""
        if self.workers:
            tokens = (self.mode or "").split("+")
            if all(t.startswith("cpu:") for t in tokens):  # every worker a CPU share: their threads
                base = f"{SPLIT} " + "+".join(t.partition(":")[2] or "1" for t in tokens)
            else:
                base = f"{SPLIT} " + "+".join(_worker_plan(t).short_label for t in tokens)
        elif self.backend == "cpu":
            base = f"cpu×{self.threads}" if self.threads else "cpu"
        else:
            base = self.device if self.device and self.device != self.backend else self.backend
        marks = [
            self.mode if self.mode and not self.workers else "",
            "cl" if self.memory_format == CHANNELS_LAST else (self.memory_format or ""),
            self.precision or "",
            f"{self.loader_workers} loader" + ("s" if self.loader_workers != 1 else "") if self.loader_workers else "",
        ]
        return " · ".join([base, *(m for m in marks if m)])

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Plan:
        return cls(
            backend=str(data["backend"]),
            threads=data.get("threads"),
            device=data.get("device"),
            mode=data.get("mode"),
            loader_workers=data.get("loader_workers"),
            memory_format=data.get("memory_format"),
            precision=data.get("precision"),
        )


@dataclass(frozen=True)
class Availability:
    """Whether something can run, and why not when it cannot. Unavailable is never shown as 0."""

    available: bool
    reason: str = ""

    def __bool__(self) -> bool:  # lets callers write `if backend.availability():`
        return self.available

    @property
    def display(self) -> str:
        return "available" if self.available else f"n/a: {self.reason}"


@dataclass(frozen=True)
class PlanPrediction:
    """The cost model's (or the first estimate's) answer for one plan."""

    plan: Plan
    predicted_s: float | None  # whole run; None when the plan is excluded
    excluded_reason: str | None = None
    source: str = "estimate"  # "estimate" | "roofline" | "history"
    detail: dict[str, Any] = field(default_factory=dict)

    @property
    def excluded(self) -> bool:
        return self.excluded_reason is not None


@dataclass(frozen=True)
class Decision:
    """What a predictor's `decide` returns: the chosen plan, how sure, and the reasoning lines the
    agent turns into events (each line is shown in the TUI trace and in --json)."""

    plan: Plan
    predicted_s: float | None
    confidence: float
    reasoning: tuple[str, ...] = ()
    margin: float | None = None  # runner-up time / chosen time - 1
    policy: str = "rules"  # "rules" (cold-start cascade) | "cost-model"
