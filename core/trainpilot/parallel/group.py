"""The process group: gloo on the CPU, nccl when every rank has a GPU, always with a timeout.

Without a timeout a rank that hangs keeps every other rank waiting forever inside a collective;
with it the waiting ranks get an error after `timeout_s` and end the run (rank 0 checkpointing
first). A rank that dies is noticed at once: its sockets close. Every collective TrainPilot itself
issues goes through `RankGroup`, which turns torch's multi-line transport errors into one line
saying which rank noticed what, and when.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from trainpilot.errors import TrainPilotError
from trainpilot.parallel.rank_env import RankInfo

DEFAULT_TIMEOUT_S = 120.0  # generous: rank 0 validates and checkpoints while the others wait
T = TypeVar("T")


class PeerLost(TrainPilotError):
    """Another rank died, hung past the timeout, or the link between ranks broke."""


def process_group_backend(device_type: str) -> str:
    return "nccl" if device_type == "cuda" else "gloo"


def describe_collective_error(exc: BaseException, timeout_s: float) -> str:
    """One line for a failed collective: timeouts and closed connections said plainly."""
    text = " ".join(str(exc).split())
    low = text.lower()
    if "timed out" in low or "timeout" in low:
        return f"the other ranks did not answer within {timeout_s:g} s (a rank hangs or is stopped)"
    if any(
        s in low
        for s in (
            "connection reset",
            "connection closed",
            "broken pipe",
            "connection refused",
            "end of file",
            "socket closed",
        )
    ):
        return "another rank died (its connection closed)"
    return f"{type(exc).__name__}: {text[:160]}"


class RankGroup:
    """An initialised process group and the few collectives the session needs."""

    def __init__(self, info: RankInfo, backend: str, timeout_s: float):
        self.info = info
        self.backend = backend
        self.timeout_s = timeout_s

    @property
    def rank(self) -> int:
        return self.info.rank

    @property
    def world_size(self) -> int:
        return self.info.world_size

    def guarded(self, what: str, call: Callable[[], T]) -> T:
        """Run a collective (or a step that contains DDP's), turning a transport failure into PeerLost."""
        try:
            return call()
        except PeerLost:
            raise
        except (RuntimeError, OSError, ValueError) as exc:  # torch's DistBackendError etc. are RuntimeErrors
            raise PeerLost(f"rank {self.rank}: {describe_collective_error(exc, self.timeout_s)} during {what}") from exc

    def sum(self, values: list[float], what: str) -> list[float]:
        import torch
        import torch.distributed as dist

        tensor = torch.tensor(values, dtype=torch.float64, device=self._device())

        def reduce() -> list[float]:
            dist.all_reduce(tensor)
            return [float(v) for v in tensor.cpu()]

        return self.guarded(what, reduce)

    def any(self, flag: bool, what: str) -> bool:
        return self.sum([1.0 if flag else 0.0], what)[0] > 0

    def broadcast(self, obj: Any, what: str) -> Any:
        """Rank 0's `obj` on every rank (pickled; for small things: a run id, a checkpoint)."""
        import torch.distributed as dist

        box = [obj if self.rank == 0 else None]

        def send() -> Any:
            dist.broadcast_object_list(box, src=0, device=self._device())
            return box[0]

        return self.guarded(what, send)

    def gather(self, obj: Any, what: str) -> list[Any]:
        """Every rank's `obj`, in rank order, on every rank."""
        import torch.distributed as dist

        out: list[Any] = [None] * self.world_size

        def collect() -> list[Any]:
            dist.all_gather_object(out, obj)
            return out

        return self.guarded(what, collect)

    def spread(self, values: Any, what: str) -> float:
        """The largest difference of any element of `values` (a float tensor) between ranks: 0.0
        when every rank holds the same numbers."""
        import torch
        import torch.distributed as dist

        hi = values.detach().to(self._device(), torch.float64).clone()
        lo = hi.clone()

        def reduce() -> float:
            dist.all_reduce(hi, op=dist.ReduceOp.MAX)
            dist.all_reduce(lo, op=dist.ReduceOp.MIN)
            return float((hi - lo).abs().max()) if hi.numel() else 0.0

        return self.guarded(what, reduce)

    def _device(self) -> Any:
        import torch

        if self.backend == "nccl":
            return torch.device("cuda", torch.cuda.current_device())
        return torch.device("cpu")


@contextmanager
def open_group(info: RankInfo, device_type: str = "cpu", timeout_s: float = DEFAULT_TIMEOUT_S) -> Iterator[RankGroup]:
    """Join the group the launcher's environment describes (env://: MASTER_ADDR, MASTER_PORT, or
    the elastic agent's store), and leave it at the end."""
    import torch.distributed as dist

    backend = process_group_backend(device_type)
    if backend == "nccl":
        import torch

        torch.cuda.set_device(info.local_rank)
    try:
        dist.init_process_group(
            backend, rank=info.rank, world_size=info.world_size, timeout=datetime.timedelta(seconds=timeout_s)
        )
    except (RuntimeError, ValueError, OSError) as exc:
        raise PeerLost(
            f"rank {info.rank}: could not join the other {info.world_size - 1} rank(s)"
            f" ({describe_collective_error(exc, timeout_s)})"
        ) from exc
    try:
        yield RankGroup(info, backend, timeout_s)
    finally:
        try:
            dist.destroy_process_group()
        except Exception:  # a group broken by a dead peer may refuse to close; the process is ending anyway
            pass
