"""Errors a user can act on. Each carries the file (when one is involved) and the problem in one line;
the CLI prints `str(error)` and exits 1 without a traceback."""

from __future__ import annotations


class TrainPilotError(Exception):
    """Base for every error that is the user's input, not a bug."""

    def __init__(self, problem: str, path: object | None = None):
        self.problem = problem
        self.path = str(path) if path is not None else None
        super().__init__(f"{self.path}: {problem}" if self.path else problem)


class DatasetError(TrainPilotError):
    pass


class WorkloadError(TrainPilotError):
    pass


class ConfigError(TrainPilotError):
    pass


class JobError(TrainPilotError):
    """The user's own job (model, data, loss or step, optimizer) cannot train as given."""


class CheckpointError(TrainPilotError):
    pass


class BackendUnavailable(TrainPilotError):
    pass


class TrainingDiverged(TrainPilotError):
    """The loss or the weights became NaN/infinite: the run stops before saving them."""


class InsufficientMemory(TrainPilotError):
    """The chosen plan needs more memory than its device (or this machine) has free."""


def describe_exception(exc: BaseException) -> str:
    """An exception as one line of an error message: its type and the first line of its text."""
    lines = [line for line in str(exc).strip().splitlines() if line.strip()]
    first = (lines or [""])[0][:200]
    if first.startswith("Caught ") and "Original Traceback" in str(exc):
        # torch re-raises a DataLoader worker's exception with its traceback as text: its last
        # line is the worker's own error, the one that says what went wrong
        first = f"{first} {lines[-1].strip()[:200]}"
    return f"{type(exc).__name__}: {first}" if first else type(exc).__name__
