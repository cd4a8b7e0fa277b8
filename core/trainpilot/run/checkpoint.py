"""Checkpoints: written atomically (temporary file, fsync, rename) so a kill mid-write never
leaves a corrupt latest checkpoint, and read with `torch.load(weights_only=True)` so a checkpoint
file can never execute code.

Each checkpoint carries a SHA-256 digest of its content: torch's zip reader does not notice a
flipped bit inside tensor data, and resuming from silently damaged weights would be worse than
refusing. The checkpoint it replaces is kept as `previous.pt` (a hard link, so at every instant
`latest.pt` is a complete file), and a run directory whose latest checkpoint is damaged resumes
from the previous one, losing one more epoch instead of the run.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import warnings
from pathlib import Path
from typing import Any

from trainpilot.errors import CheckpointError

LATEST = "latest.pt"
PREVIOUS = "previous.pt"
FORMAT_VERSION = 2  # 2: adds "digest"; version 1 files (no digest) are still read
REQUIRED = ("model_state", "optimizer_state", "epoch", "step", "config", "format_version")
CONFIG_KEYS = ("model", "dataset", "batch_size", "lr", "seed", "val_fraction", "epochs")


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
        _keep_previous(path)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    _fsync_dir(path.parent)


def _keep_previous(path: Path) -> None:
    """Hard-link the current file as previous.pt before it is replaced (latest.pt never goes missing)."""
    if path.name != LATEST or not path.is_file():
        return
    link = path.with_name(f".{PREVIOUS}.link.tmp")
    try:
        link.unlink(missing_ok=True)
        os.link(path, link)
        os.replace(link, path.with_name(PREVIOUS))
    except OSError:  # a file system without hard links: keep only the latest
        pass
    # rename() between two links of one file does nothing (POSIX): when previous.pt already is
    # latest.pt (a writer killed between the two renames), the link is still here.
    link.unlink(missing_ok=True)


def _fsync_dir(directory: Path) -> None:
    try:
        dir_fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(dir_fd)
    except OSError:
        pass
    finally:
        os.close(dir_fd)


def remove_stale_temporaries(directory: Path) -> None:
    """Temporary files left by a writer that was killed mid-write (never a valid checkpoint)."""
    for stale in list(directory.glob(f".{LATEST}.*.tmp")) + list(directory.glob(f".{PREVIOUS}.*.tmp")):
        stale.unlink(missing_ok=True)


def content_digest(state: dict[str, Any]) -> str:
    """SHA-256 over every tensor's dtype, shape and bytes and every other value's repr, in a
    canonical order; independent of how torch lays the file out."""
    h = hashlib.sha256()
    _feed(h, {k: v for k, v in state.items() if k != "digest"})
    return h.hexdigest()


def _feed(h: Any, value: Any) -> None:
    import torch

    if isinstance(value, torch.Tensor):
        t = value.detach().cpu().contiguous()
        h.update(f"T{t.dtype}{tuple(t.shape)}".encode())
        if t.numel():
            h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes())
    elif isinstance(value, dict):
        h.update(b"{")
        for key in sorted(value, key=lambda k: (type(k).__name__, repr(k))):
            h.update(repr(key).encode() + b":")
            _feed(h, value[key])
        h.update(b"}")
    elif isinstance(value, (list, tuple)):
        h.update(b"[")
        for item in value:
            _feed(h, item)
        h.update(b"]")
    else:
        h.update(repr(value).encode() + b";")


def save_checkpoint(directory: Path, state: dict[str, Any]) -> Path:
    import torch

    path = directory / LATEST
    payload = dict(state, format_version=FORMAT_VERSION)
    payload["digest"] = content_digest(payload)
    try:
        directory.mkdir(parents=True, exist_ok=True)
        remove_stale_temporaries(directory)
        atomic_write_bytes(path, lambda handle: torch.save(payload, handle))
    except OSError as exc:  # disk full, read-only, permissions: the previous checkpoint is intact
        raise CheckpointError(f"cannot write checkpoint ({exc.strerror or exc})", path) from exc
    return path


def load_checkpoint(path: Path) -> dict[str, Any]:
    """Read and verify a checkpoint file, or a run directory's latest one (falling back to the
    previous checkpoint when the latest is damaged; the returned state then has "recovered_from")."""
    path = Path(path)
    if not path.is_dir():
        return _load_file(path)
    latest, previous = path / LATEST, path / PREVIOUS
    try:
        return _load_file(latest)
    except CheckpointError as exc:
        if not previous.is_file():
            raise
        try:
            state = _load_file(previous)
        except CheckpointError:
            raise exc from None
        state["recovered_from"] = str(exc)
        return state


def _load_file(path: Path) -> dict[str, Any]:
    import torch

    if not path.is_file():
        raise CheckpointError("no checkpoint found", path)
    try:
        with warnings.catch_warnings():  # torch warns about odd pickles on stderr; the error below says it
            warnings.simplefilter("ignore")
            state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # truncated zip, wrong format, pickled code refused by weights_only
        first = (str(exc).strip().splitlines() or [""])[0][:160]
        raise CheckpointError(f"not a readable TrainPilot checkpoint ({type(exc).__name__}: {first})", path) from exc
    if not isinstance(state, dict) or not set(REQUIRED) <= set(state):
        missing = sorted(set(REQUIRED) - set(state)) if isinstance(state, dict) else list(REQUIRED)
        raise CheckpointError(f"not a TrainPilot checkpoint (missing {', '.join(missing)})", path)
    version = state["format_version"]
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise CheckpointError(f"not a TrainPilot checkpoint (format_version {version!r})", path)
    if version > FORMAT_VERSION:
        raise CheckpointError(f"written by a newer TrainPilot (format {version} > {FORMAT_VERSION})", path)
    if version >= 2 and state.get("digest") != content_digest(state):
        raise CheckpointError("damaged: its content does not match its digest (a changed or corrupted file)", path)
    _check_structure(state, path)
    state["loaded_from"] = str(path)
    return state


def _check_structure(state: dict[str, Any], path: Path) -> None:
    import torch

    model_state = state["model_state"]
    if (
        not isinstance(model_state, dict)
        or not model_state
        or not all(isinstance(k, str) and isinstance(v, torch.Tensor) for k, v in model_state.items())
    ):
        raise CheckpointError("damaged: model_state is not a mapping of names to tensors", path)
    optimizer_state = state["optimizer_state"]
    if not isinstance(optimizer_state, dict) or not {"state", "param_groups"} <= set(optimizer_state):
        raise CheckpointError("damaged: optimizer_state is not an optimizer state", path)
    for key in ("epoch", "step"):
        value = state[key]
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise CheckpointError(f"damaged: {key} is {value!r}, not a count", path)
    config = state["config"]
    if not isinstance(config, dict) or not set(CONFIG_KEYS) <= set(config):
        missing = sorted(set(CONFIG_KEYS) - set(config)) if isinstance(config, dict) else list(CONFIG_KEYS)
        raise CheckpointError(f"damaged: its run configuration lacks {', '.join(missing)}", path)


def check_finite(state: dict[str, Any], epoch: int, step: int, kept: str) -> None:
    """A checkpoint never stores NaN or infinite weights: the run has diverged, said in one line."""
    from trainpilot.errors import TrainingDiverged

    bad = [
        name
        for name, tensor in state["model_state"].items()
        if tensor.is_floating_point() and not bool(tensor.isfinite().all())
    ]
    if bad:
        raise TrainingDiverged(
            f"weights became NaN or infinite ({', '.join(bad[:3])}) by epoch {epoch}, step {step} (try a lower --lr);"
            f" {kept}"
        )


def checkpoint_meta(
    *,
    epoch: int,
    step: int,
    run_id: str,
    config: dict[str, Any],
    plan: Any,
    epoch_records: list[dict[str, Any]],
    totals: dict[str, float],
    fingerprint: dict[str, Any] | None,
) -> dict[str, Any]:
    """What a checkpoint stores beside the tensors: where the run was, and what resuming needs."""
    config = dict(config)
    config["model"] = config["model"] if isinstance(config["model"], str) else dict(config["model"])
    config["dataset"] = absolute_dataset(config["dataset"])
    if config.get("job"):  # file.py:make_job, resumable from any directory
        from trainpilot.job.job_file import absolute_reference

        config["job"] = absolute_reference(config["job"])
    return dict(
        epoch=epoch,
        step=step,
        run_id=run_id,
        config=config,
        plan=plan.to_dict() if plan else None,
        epoch_records=epoch_records,
        epoch_totals=totals,
        dataset_fingerprint=fingerprint,
    )


def absolute_dataset(dataset: Any) -> Any:
    """Store a dataset path absolute, so `--resume` works from any directory."""
    if not isinstance(dataset, str) or dataset in ("demo", "arrays"):
        return dataset
    path = Path(dataset).expanduser()
    return str(path.resolve()) if path.exists() else dataset
