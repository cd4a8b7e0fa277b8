"""What resuming a run needs: finding its checkpoint, checking it fits the model and the data, and
storing what makes a later resume work from any directory. One-line errors name the checkpoint."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from trainpilot.errors import CheckpointError, TrainPilotError, describe_exception


def shape_text(fingerprint: Any) -> str:
    try:
        shape = "x".join(str(d) for d in fingerprint["sample_shape"])
        return f"{fingerprint['samples']} samples of {shape} in {fingerprint['num_classes']} classes"
    except (TypeError, KeyError):
        return repr(fingerprint)


def restore_checkpoint(trainer: Any, state: dict[str, Any], model_name: str) -> None:
    """Load a verified checkpoint into the trainer; a mismatch is the checkpoint's problem, said in one line."""
    try:
        trainer.load_state_dict(state)
    except Exception as exc:
        raise CheckpointError(
            f"does not fit model {model_name} ({describe_exception(exc)})", state.get("loaded_from")
        ) from exc


LAST = "last"  # `--resume last`: the newest crashed or interrupted run of this host


def resolve_run(resume: str) -> str:
    """The run id (or checkpoint path) that `resume` names: itself, or for "last" the newest run
    the history shows as crashed or interrupted, with a checkpoint (runlog.last_resumable)."""
    if resume != LAST:
        return resume
    from trainpilot.paths import history_db_path
    from trainpilot.predict.history import History, HistoryUnavailable
    from trainpilot.run.runlog import last_resumable

    try:
        history = History(history_db_path())
    except (HistoryUnavailable, OSError) as exc:
        raise TrainPilotError(f"cannot read the run history to find the last run: {exc}") from exc
    return last_resumable(history)


def checkpoint_path(resume: str) -> Path:
    from trainpilot.paths import runs_dir

    candidate = Path(resume).expanduser()
    if candidate.exists():
        return candidate
    return runs_dir() / resume


def resumed_config(config: Any, load_state: Any) -> tuple[Any, dict[str, Any]]:
    """(config, state) to resume `config.resume`: the checkpoint's state (read by `load_state`,
    a path -> state callable), and the config with the run's own settings taken from it. The epoch
    count asked for now wins over the saved one (train a finished run further)."""
    from dataclasses import replace

    if config.resume == LAST:
        config = replace(config, resume=resolve_run(config.resume))
    state = load_state(checkpoint_path(config.resume))
    saved = state["config"]
    config = replace(
        config,
        model=saved["model"],
        dataset=saved["dataset"],
        batch_size=saved["batch_size"],
        lr=saved["lr"],
        seed=saved["seed"],
        val_fraction=saved["val_fraction"],
        freeze=saved.get("freeze", config.freeze),
        job=saved.get("job", config.job),
        workers=saved.get("workers", config.workers),
        # the run's numerics and layout go on as they were, unless asked otherwise now
        memory_format=saved.get("memory_format", "auto") if config.memory_format == "auto" else config.memory_format,
        precision=saved.get("precision", "fp32") if config.precision == "fp32" else config.precision,
        epochs=config.epochs if config.epochs is not None else saved["epochs"],
    )
    return config, state
