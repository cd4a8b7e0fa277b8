"""The backend a plan names: a device backend (backends/), or the split across several of them.

The backends package knows devices only; the split backend is built from them here, so whatever
resolves a plan's backend (the agent weighing plans, the trainer running one) uses this resolver.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

from trainpilot import backends as devices
from trainpilot.backends import Backend, BackendResolver
from trainpilot.parallel.split_backend import SplitBackend
from trainpilot.plans import SPLIT


@cache
def _split_backend() -> SplitBackend:
    return SplitBackend()


def resolve_backend(name: str) -> Backend:
    if name == SPLIT:  # several workers at once; the agent offers it beside the device backends
        return _split_backend()
    return devices.get_backend(name)  # looked up at each call: one registry, whoever resolves


def session_backends(freeze: int | None = None, work_dir: Path | None = None) -> BackendResolver:
    """The backends one session uses: the shared instances, except an ANE backend carrying this
    session's options (--freeze N, where its Core ML files go). The shared instance never changes."""
    if freeze is None and work_dir is None:
        return resolve_backend
    ane = devices.get_backend("ane").with_options(freeze=freeze, work_dir=work_dir)  # type: ignore[attr-defined]

    def resolve(name: str) -> Backend:
        return ane if name == "ane" else resolve_backend(name)

    return resolve
