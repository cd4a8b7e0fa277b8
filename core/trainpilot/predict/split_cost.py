"""What a split plan's step costs: workers at once on their shares, then combining the gradients.

    step = max(sum_i fixed_i, max_i(fixed_i + n_i * per_sample_i))   workers in parallel
         + combine                                                   weighted sum of k gradients
         + transfer                                                  weights to / gradients from a device
         + optimizer                                                 one Adam step, on the host

Two things make a split cost more than "the slowest share":
- every worker of one process runs its Python (dispatch of each layer, autograd's bookkeeping) under
  one interpreter lock, so the fixed parts of the workers add up instead of overlapping: a small
  model whose step is mostly overhead gains nothing from a second worker;
- each worker is predicted under the load the others put on the machine: next to another CPU
  worker (or a device's host thread) a CPU worker runs at the "one core busy" rates calibration
  measured, not the idle ones.
The shares are `finish_time_shares` of the same per-worker costs, so the prediction is of the split
that would run.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from trainpilot.plans import Plan
from trainpilot.predict.roofline_terms import RooflineEstimate
from trainpilot.predict.shares import finish_time_shares
from trainpilot.predict.step_cost import StepCost, epoch_steps, step_cost
from trainpilot.units import seconds as fmt_s

# Host <-> device copies of a split with an accelerator worker. Assumed, not measured (no such
# device here): PCIe 4.0 x16 moves ~25 GB/s peak, pageable-memory copies reach about half
# (NVIDIA's bandwidthTest, pageable vs pinned). Apple's unified memory copies at memory speed.
ADAM_PASSES = 7.0
HOST_DEVICE_BYTES_PER_S = {"cuda": 12e9, "mps": 50e9}


@dataclass(frozen=True)
class SplitStep:
    plan: Plan
    workers: tuple[StepCost, ...]
    shares: tuple[int, ...]
    worker_s: tuple[float, ...]  # each worker's fixed + share (no optimizer: that runs once)
    parallel_s: float  # the workers' part of the step (interpreter lock included)
    combine_s: float
    transfer_s: float
    optimizer_s: float

    @property
    def step_s(self) -> float:
        return self.parallel_s + self.combine_s + self.transfer_s + self.optimizer_s

    def to_dict(self) -> dict[str, Any]:
        return {
            "workers": [w.plan.label for w in self.workers],
            "shares": list(self.shares),
            "worker_step_s": [round(s, 6) for s in self.worker_s],
            "worker_busy_cores": [round(w.busy_cores, 2) for w in self.workers],
            "parallel_s": round(self.parallel_s, 6),
            "interpreter_lock_s": round(sum(w.fixed_s for w in self.workers), 6),
            "combine_s": round(self.combine_s, 6),
            "transfer_s": round(self.transfer_s, 6),
            "optimizer_s": round(self.optimizer_s, 6),
            "step_s": round(self.step_s, 6),
        }


def _host_threads(plan: Plan) -> int:
    return plan.threads or 1 if plan.backend == "cpu" else 1  # an accelerator's host thread


def split_step(
    features: Any, plan: Plan, busy_cores: float, calibration: Any, batch: int | None = None
) -> SplitStep | None:
    """The predicted step of split `plan` on `batch` samples (default the profile's batch) under
    `busy_cores` of outside load; None when a worker's plan is not calibrated."""
    workers = plan.workers
    if len(workers) < 2:
        return None
    total_threads = sum(_host_threads(w) for w in workers)
    costs = []
    for w in workers:
        cost = step_cost(features, w, busy_cores + total_threads - _host_threads(w), calibration)
        if cost is None:
            return None
        costs.append(cost)
    n = features.batch_size if batch is None else batch
    shares = finish_time_shares(n, [c.per_sample_s for c in costs], [c.fixed_s for c in costs])
    worker_s = tuple(c.fixed_s + s * c.per_sample_s if s else 0.0 for c, s in zip(costs, shares, strict=False))
    lock_s = sum(c.fixed_s for c, s in zip(costs, shares, strict=False) if s)
    host = next((c for c in costs if c.plan.backend == "cpu"), costs[0])
    active = sum(1 for s in shares if s)
    # Combining reads k gradients and writes their sum: k + 1 passes over weight-sized tensors.
    # Adam's step, which calibration measured per weight byte, makes about 7 (reads weights,
    # gradients and two moments, writes three back), so combining costs (k + 1) / 7 of it.
    combine_s = host.optimizer_s * (active + 1) / ADAM_PASSES
    transfer_s = sum(
        2.0 * features.weight_bytes / HOST_DEVICE_BYTES_PER_S[c.plan.backend]
        for c, s in zip(costs, shares, strict=False)
        if s and c.plan.backend in HOST_DEVICE_BYTES_PER_S
    )
    return SplitStep(
        plan, tuple(costs), shares, worker_s, max(lock_s, max(worker_s)), combine_s, transfer_s, host.optimizer_s
    )


def split_estimate(features: Any, plan: Plan, busy_cores: float, calibration: Any) -> Any:
    """A `roofline.RooflineEstimate` for a split plan (None when it cannot be predicted): the
    roofline's answer for this plan, so history corrections and drift apply to it as to any."""
    full = split_step(features, plan, busy_cores, calibration)
    if full is None:
        return None
    steps, last_n = epoch_steps(features)
    last = split_step(features, plan, busy_cores, calibration, batch=last_n)
    assert last is not None
    epoch_s = steps * full.step_s + last.step_s
    warmup = max(c.warmup_steps for c in full.workers)
    run_s = features.epochs * epoch_s + warmup * full.step_s
    per_run = features.epochs * (steps + 1)
    lock = sum(c.fixed_s for c in full.workers)
    breakdown = {
        "overhead": per_run * lock,
        "compute": per_run * max(full.parallel_s - lock, 0.0),
        "memory": per_run * (full.combine_s + full.transfer_s + full.optimizer_s),
        "combine": per_run * full.combine_s,
        "warmup": warmup * full.step_s,
    }
    return RooflineEstimate(run_s, epoch_s, full.step_s, breakdown, 0.0, 1.0, max(c.fit_error for c in full.workers))


def split_detail(features: Any, plan: Plan, busy_cores: float, calibration: Any) -> dict[str, Any]:
    """A split prediction's `detail["split"]`: the step's parts and a note for the trace."""
    found = split_step(features, plan, busy_cores, calibration)
    if found is None:
        return {}
    data = found.to_dict()
    data["steps_per_epoch"] = features.steps
    ms = "/".join(f"{s * 1e3:.1f}" for s in found.worker_s)
    data["note"] = (
        f"; per step: shares {'+'.join(map(str, found.shares))}, workers {ms} ms,"
        f" {data['interpreter_lock_s'] * 1e3:.1f} ms of it under one interpreter lock,"
        f" combining {found.combine_s * 1e3:.2f} ms"
    )
    return data


def why_not_split(timed: list[Any], best: Any) -> list[str]:
    """Trace lines for every split plan that lost: by how much, and what its step is made of."""
    lines = []
    for p in timed:
        if not p.plan.workers or p is best or p.predicted_s is None:
            continue
        split = p.detail.get("split") or {}
        parts = ""
        if split:
            best_step = split["step_s"] if best.plan.workers else _step_of(best, split["steps_per_epoch"])
            parts = (
                f"; its step {split['step_s'] * 1e3:.1f} ms = slowest worker {max(split['worker_step_s']) * 1e3:.1f} ms"
                f" (shares {'+'.join(map(str, split['shares']))}, interpreter lock"
                f" {split['interpreter_lock_s'] * 1e3:.1f} ms)"
                f" + combine {split['combine_s'] * 1e3:.2f} ms + optimizer {split['optimizer_s'] * 1e3:.2f} ms"
            )
            if best_step is not None:
                parts += f", against {best_step * 1e3:.1f} ms on {best.plan.label}"
        lines.append(
            f"{p.plan.label} not chosen: predicted {fmt_s(p.predicted_s)},"
            f" {p.predicted_s / best.predicted_s - 1:.0%} slower than"
            f" {best.plan.label} ({fmt_s(best.predicted_s)}){parts}"
        )
    return lines


def _step_of(prediction: Any, steps_per_epoch: int) -> float | None:
    """A single-device plan's predicted step (its epoch over the same number of steps)."""
    per_epoch = prediction.detail.get("per_epoch_s")
    return per_epoch / steps_per_epoch if per_epoch and steps_per_epoch else None
