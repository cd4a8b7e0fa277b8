"""Where Core ML places each operation of an exported model: the figures behind "ran on the ANE".

Core ML decides placement per operation; on macOS 14.4+ `MLComputePlan` reports the device it
prefers for every operation and each operation's estimated share of the model's cost. The runtime
adapter reads those (macOS only); this module turns them into counts and shares, and words them.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

# coremltools' compute-device classes, by class name (their modules only load on macOS)
DEVICE_BY_CLASS = {
    "MLNeuralEngineComputeDevice": "ane",
    "MLGPUComputeDevice": "gpu",
    "MLCPUComputeDevice": "cpu",
}
LABELS = {"ane": "ANE", "gpu": "GPU", "cpu": "CPU", "unknown": "unknown"}
# Operations that are bookkeeping rather than compute; Core ML often reports no device for them.
SKIPPED_OPS = frozenset({"const"})


def device_name(device: object | None) -> str:
    if device is None:
        return "unknown"
    return DEVICE_BY_CLASS.get(type(device).__name__, "unknown")


@dataclass(frozen=True)
class OpPlacement:
    op: str  # ML-program operator name, e.g. "conv"
    device: str  # "ane" | "gpu" | "cpu" | "unknown"
    cost: float | None = None  # estimated share of the model's cost, 0..1, when Core ML gives one


@dataclass(frozen=True)
class PlacementReport:
    counts: dict[str, int]  # operations per device
    cost_share: dict[str, float] = field(default_factory=dict)  # estimated cost share per device
    by_op: dict[str, dict[str, int]] = field(default_factory=dict)  # op type -> device -> count

    @property
    def total_ops(self) -> int:
        return sum(self.counts.values())

    @property
    def ran_on_ane(self) -> bool:
        return self.counts.get("ane", 0) > 0

    def summary(self) -> str:
        """One line for the UI, e.g. "9 ops planned by Core ML: ANE 8 (97% est. cost), CPU 1 (3%)"."""
        if not self.total_ops:
            return "Core ML reported no operations"
        parts = []
        for device, count in sorted(self.counts.items(), key=lambda kv: -kv[1]):
            share = self.cost_share.get(device)
            parts.append(
                f"{LABELS.get(device, device)} {count}" + (f" ({share:.0%} est. cost)" if share is not None else "")
            )
        return f"{self.total_ops} ops planned by Core ML: " + ", ".join(parts)

    def to_dict(self) -> dict[str, object]:
        return {
            "counts": dict(self.counts),
            "cost_share": dict(self.cost_share),
            "by_op": {k: dict(v) for k, v in self.by_op.items()},
        }


def summarize(entries: Iterable[OpPlacement]) -> PlacementReport:
    counts: dict[str, int] = {}
    costs: dict[str, float] = {}
    by_op: dict[str, dict[str, int]] = {}
    have_cost = False
    for entry in entries:
        if entry.op in SKIPPED_OPS:
            continue
        counts[entry.device] = counts.get(entry.device, 0) + 1
        by_op.setdefault(entry.op, {})
        by_op[entry.op][entry.device] = by_op[entry.op].get(entry.device, 0) + 1
        if entry.cost is not None:
            have_cost = True
            costs[entry.device] = costs.get(entry.device, 0.0) + float(entry.cost)
    total_cost = sum(costs.values())
    share = {d: c / total_cost for d, c in costs.items()} if have_cost and total_cost > 0 else {}
    return PlacementReport(counts=counts, cost_share=share, by_op=by_op)
