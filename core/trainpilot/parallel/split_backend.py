"""The split backend: one batch shared by several workers of this process (parallel/split_runner.py).

Plans it offers (each predicted by predict/split_cost.py, chosen only where that beats every
single-device plan):
- two CPU workers of one thread each, on a machine with two or more cores. CPU workers of one
  process share torch's single intra-op thread setting, so a split of CPU groups is one thread per
  worker; groups of different sizes need separate processes (`run --nproc`, torch.distributed);
- an accelerator (CUDA device, the Apple GPU) plus a CPU worker with the remaining cores.
The host keeps the weights and the optimizer; the trainer calls `step_runner` once per plan.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from trainpilot.backends.base import Backend
from trainpilot.plans import SPLIT, Availability, Plan

if TYPE_CHECKING:
    import torch


class SplitBackend(Backend):
    name = SPLIT
    title = "Split (one batch across several workers)"
    runs_on = "several workers at once: CPU thread groups, or an accelerator and the CPU"

    def __init__(self, resolve: Any = None):
        self._resolve = resolve  # name -> Backend, for the workers' backends (default get_backend)

    def _backend(self, name: str) -> Backend:
        if self._resolve is not None:
            return self._resolve(name)
        from trainpilot.backends import get_backend

        return get_backend(name)

    def availability(self) -> Availability:
        from trainpilot.machine.probe import usable_cpus

        if usable_cpus() >= 2 or any(self._backend(n).availability() for n in ("cuda", "mps")):
            return Availability(True)
        return Availability(False, "one core and no accelerator: nothing to split a batch across")

    def plans(self, logical_cpus: int) -> list[Plan]:
        out = []
        if logical_cpus >= 2:
            out.append(Plan.split([Plan("cpu", threads=1), Plan("cpu", threads=1)]))
        for name in ("cuda", "mps"):
            backend = self._backend(name)
            if backend.availability():
                for device_plan in backend.plans(logical_cpus)[:1]:
                    out.append(Plan.split([device_plan, Plan("cpu", threads=max(logical_cpus - 1, 1))]))
        return out

    def supports(self, profile: Any) -> Availability:
        # A job's own loss or step splits too: each share's loss is weighted by Job.loss_reduction
        # (split_runner.py); a batch that cannot be cut along its samples fails the first step,
        # and the run falls back to the CPU with that reason.
        kinds = dict(getattr(profile, "layer_kinds", {}) or {})
        dependent = list((getattr(profile, "extra", None) or {}).get("batch_dependent") or ())
        if dependent:
            return Availability(
                False,
                f"{', '.join(dependent[:3])}: computes something different on a shard than on the whole batch",
            )
        if kinds.get("norm"):
            # the profile does not tell BatchNorm (batch statistics) from LayerNorm (per sample)
            return Availability(
                False, "normalisation layers: BatchNorm's statistics on a shard differ from the whole batch's"
            )
        return Availability(True)

    def supports_plan(self, profile: Any, plan: Plan) -> Availability:
        workers = plan.workers
        if len(workers) < 2:
            return Availability(False, f"a split needs at least two workers, got '{plan.mode}'")
        cpu = [w for w in workers if w.backend == "cpu"]
        if len(cpu) > 1 and any((w.threads or 1) != 1 for w in cpu):
            return Availability(
                False,
                "CPU workers in one process share one intra-op thread count: one thread each"
                " (use --nproc for larger groups)",
            )
        for w in workers:
            avail = self._backend(w.backend).availability()
            if not avail:
                return Availability(False, f"worker {w.label}: {avail.reason}")
        return self.supports(profile)

    def device(self, plan: Plan) -> torch.device:
        import torch

        return torch.device("cpu")  # the host holds the weights and the optimizer state

    def activate(self, plan: Plan) -> None:
        import torch

        threads = [w.threads or 1 for w in plan.workers if w.backend == "cpu"]
        torch.set_num_threads(1 if len(threads) != 1 else threads[0])

    def synchronize(self, plan: Plan) -> None:
        for w in plan.workers:
            if w.backend != "cpu":
                self._backend(w.backend).synchronize(w)

    def step_runner(self, model: torch.nn.Module, plan: Plan) -> Any:
        from trainpilot.parallel.split_runner import SplitRunner

        return SplitRunner(model, plan)


def split_candidates(
    resolve: Any, logical_cpus: int, profile: Any, hardware_backends: dict[str, Availability]
) -> list[tuple[Plan, Availability]]:
    """The split plans the agent weighs next to the single-device ones, each with whether it can run."""
    backend = resolve(SPLIT)
    avail = backend.availability()
    if not avail:
        return [(Plan(SPLIT), avail)]
    out = []
    for plan in backend.plans(logical_cpus):
        why = next(
            (
                hardware_backends[w.backend]
                for w in plan.workers
                if w.backend in hardware_backends and not hardware_backends[w.backend]
            ),
            None,
        )
        out.append((plan, why if why is not None else backend.supports_plan(profile, plan)))
    return out
