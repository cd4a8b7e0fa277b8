"""Checkpoints: written atomically (temporary file, fsync, rename) so a kill mid-write never
leaves a corrupt latest checkpoint, and read with `torch.load(weights_only=True)` so a checkpoint
file can never execute code.
"""
from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

from .errors import CheckpointError

LATEST = "latest.pt"
FORMAT_VERSION = 1


def atomic_write_bytes(path: Path, writer: Any) -> None:
    """Call writer(file) on a temporary file in the same directory, fsync it, then rename it over
    `path`, and fsync the directory so the rename itself survives a power cut."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            writer(handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    try:
        dir_fd = os.open(path.parent, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(dir_fd)
    except OSError:
        pass
    finally:
        os.close(dir_fd)


def save_checkpoint(directory: Path, state: dict[str, Any]) -> Path:
    import torch

    path = directory / LATEST
    payload = dict(state, format_version=FORMAT_VERSION)
    atomic_write_bytes(path, lambda handle: torch.save(payload, handle))
    return path


def load_checkpoint(path: Path) -> dict[str, Any]:
    import torch

    if path.is_dir():
        path = path / LATEST
    if not path.is_file():
        raise CheckpointError("no checkpoint found", path)
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # truncated zip, wrong format, pickled code refused by weights_only
        raise CheckpointError(f"not a readable TrainPilot checkpoint ({type(exc).__name__}: {str(exc).splitlines()[0][:160]})", path) from exc
    required = {"model_state", "optimizer_state", "epoch", "step", "config", "format_version"}
    if not isinstance(state, dict) or not required <= set(state):
        missing = sorted(required - set(state)) if isinstance(state, dict) else sorted(required)
        raise CheckpointError(f"not a TrainPilot checkpoint (missing {', '.join(missing)})", path)
    if state["format_version"] > FORMAT_VERSION:
        raise CheckpointError(f"written by a newer TrainPilot (format {state['format_version']} > {FORMAT_VERSION})", path)
    return state
