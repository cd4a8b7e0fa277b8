"""The hardware probe: what this machine has, which backends exist here and why not.

Live utilisation sampling is in `monitor`; this module answers the slower, static questions once.
"""

from __future__ import annotations

import hashlib
import os
import platform
import socket
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import Any

import psutil

from trainpilot.plans import Availability


@dataclass(frozen=True)
class HardwareInfo:
    machine_id: str  # stable per machine: keys calibration and history
    system: str
    machine: str
    processor: str
    physical_cores: int
    logical_cpus: int
    memory_bytes: int
    backends: dict[str, Availability] = field(default_factory=dict)

    def available_backends(self) -> list[str]:
        return [name for name, avail in self.backends.items() if avail.available]

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["backends"] = {name: {"available": a.available, "reason": a.reason} for name, a in self.backends.items()}
        return data


def cpu_model_name() -> str:
    name = platform.processor()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as handle:
            for line in handle:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return name or platform.machine()


def usable_cpus() -> int:
    """CPUs this process may run on (affinity / cgroup aware where the OS tells), not the socket's."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return psutil.cpu_count(logical=True) or 1


# The CPUs this process was given before it pinned itself to one rank's slice of them (None: not
# pinned). A rank still runs on the machine the launch saw: set by parallel/rank_env.pin_to.
_cpus_before_pinning: int | None = None


def note_pinned(cpus_before: int) -> None:
    """This process is about to pin itself to a rank's slice of its `cpus_before` CPUs. The machine
    it describes from then on is still the whole one: its id keys the calibration and the history,
    and a rank that described only its slice read no calibration and recorded its run under an id
    no other run of this machine has (so `history` did not list it)."""
    global _cpus_before_pinning
    if _cpus_before_pinning is None:  # the first pinning is the one that narrowed the machine
        _cpus_before_pinning = int(cpus_before)


def machine_cpus() -> int:
    """The CPUs of the machine as TrainPilot sees it: `usable_cpus`, or in a rank pinned to its
    slice, what the process had before (`note_pinned`)."""
    return _cpus_before_pinning or usable_cpus()


def describe_machine(backends: Iterable[Any] = ()) -> HardwareInfo:
    """This machine, with the availability of each of `backends` (objects with `name` and
    `availability()`; the backends package passes its own: backends.probe)."""
    processor = cpu_model_name()
    logical = machine_cpus()
    key = f"{socket.gethostname()}|{platform.system()}|{platform.machine()}|{processor}|{logical}"
    availability: dict[str, Availability] = {}
    for backend in backends:
        try:
            availability[backend.name] = backend.availability()
        except Exception as exc:  # a broken driver must not take the probe down
            availability[backend.name] = Availability(False, f"probe failed: {type(exc).__name__}: {exc}")
    return HardwareInfo(
        machine_id=hashlib.sha1(key.encode()).hexdigest()[:12],
        system=platform.system(),
        machine=platform.machine(),
        processor=processor,
        physical_cores=psutil.cpu_count(logical=False) or logical,
        logical_cpus=logical,
        memory_bytes=psutil.virtual_memory().total,
        backends=availability,
    )
