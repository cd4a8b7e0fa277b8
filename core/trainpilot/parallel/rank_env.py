"""Which rank this process is, read from the variables torchrun (and torch's elastic launcher,
which `--nproc` uses) sets: RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR/PORT."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from trainpilot.errors import ConfigError


@dataclass(frozen=True)
class RankInfo:
    rank: int
    world_size: int
    local_rank: int
    local_world_size: int

    @property
    def is_leader(self) -> bool:
        """Rank 0: the one that checkpoints, records the history and reports."""
        return self.rank == 0

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> RankInfo | None:
        """This process's rank, or None when no launcher started it as one (WORLD_SIZE unset or 1:
        a world of one process is a plain run)."""
        env = os.environ if env is None else env
        if "RANK" not in env or "WORLD_SIZE" not in env:
            return None
        world = _count(env, "WORLD_SIZE", minimum=1)
        if world == 1:
            return None
        rank = _count(env, "RANK", minimum=0)
        if rank >= world:
            raise ConfigError(f"RANK={rank} is not below WORLD_SIZE={world}")
        local_world = _count(env, "LOCAL_WORLD_SIZE", minimum=1) if "LOCAL_WORLD_SIZE" in env else 1
        local_rank = _count(env, "LOCAL_RANK", minimum=0) if "LOCAL_RANK" in env else 0
        if local_rank >= local_world:
            raise ConfigError(f"LOCAL_RANK={local_rank} is not below LOCAL_WORLD_SIZE={local_world}")
        return cls(rank, world, local_rank, local_world)


def _count(env: Mapping[str, str], name: str, *, minimum: int) -> int:
    raw = env[name]
    try:
        value = int(raw)
    except ValueError:
        raise ConfigError(f"environment variable {name}={raw!r} is not an integer") from None
    if value < minimum:
        raise ConfigError(f"environment variable {name}={value} must be at least {minimum}")
    return value


def local_cores(info: RankInfo) -> list[int] | None:
    """The cores this rank should run on when several ranks share one machine: its own slice of the
    process's allowed cores, so ranks do not take turns on the same core (on a 2-core machine, two
    ranks of one thread each, one per core). None when there are fewer cores than local ranks or
    the platform cannot pin (macOS)."""
    if info.local_world_size < 2 or not hasattr(os, "sched_getaffinity"):
        return None
    cores = sorted(os.sched_getaffinity(0))
    if len(cores) < info.local_world_size:
        return None
    per = len(cores) // info.local_world_size
    return cores[info.local_rank * per : (info.local_rank + 1) * per]


def pin_to(cores: list[int] | None) -> None:
    if cores and hasattr(os, "sched_setaffinity"):
        from trainpilot.machine.probe import note_pinned

        note_pinned(len(os.sched_getaffinity(0)))  # the rank still describes the launch's machine
        os.sched_setaffinity(0, cores)
