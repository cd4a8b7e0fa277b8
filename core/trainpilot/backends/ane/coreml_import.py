"""Importing coremltools lazily and quietly.

coremltools takes seconds to import, more from a cold interpreter (measured:
docs/what-runs-where.md#costs-measured-here), and on Linux it logs eight "Failed to load
_MLModelProxy ..." warnings plus a "Torch version ... has not been tested" warning. During
conversion it draws tqdm progress bars on stderr and `print`s to stdout (the updatable-model builder
announces its loss target). Headless mode keeps stdout for JSON and the TUI owns the terminal, so
everything coremltools says is captured here and kept in `notes()` (and logged at DEBUG under
"trainpilot.ane") instead of reaching the screen.

Nothing here imports coremltools at module import time; `availability()` probes only the file
system (importlib's find_spec of a top-level package does not execute it).
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import logging
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

from trainpilot.errors import BackendUnavailable

_log = logging.getLogger("trainpilot.ane")

_module: ModuleType | None = None
_import_seconds: float | None = None
_notes: list[str] = []


class _ListHandler(logging.Handler):
    def __init__(self, sink: list[str]):
        super().__init__(level=logging.INFO)
        self.sink = sink

    def emit(self, record: logging.LogRecord) -> None:
        self.sink.append(f"{record.levelname.lower()}: {record.getMessage()}")


@contextlib.contextmanager
def quiet_coremltools() -> Iterator[list[str]]:
    """Capture coremltools' log records, Python warnings, stdout and stderr for the duration.

    stdout/stderr are swapped process-wide (contextlib.redirect_*), so keep the block short: it
    wraps one import or one conversion (well under a second for the models TrainPilot converts).
    """
    captured: list[str] = []
    logger = logging.getLogger("coremltools")
    handler = _ListHandler(captured)
    old_propagate, old_level = logger.propagate, logger.level
    logger.addHandler(handler)
    logger.propagate = False
    logger.setLevel(logging.INFO)  # its DEBUG records are per-pass chatter, hundreds per conversion
    out, err = io.StringIO(), io.StringIO()
    try:
        with (
            warnings.catch_warnings(record=True) as caught,
            contextlib.redirect_stdout(out),
            contextlib.redirect_stderr(err),
        ):
            warnings.simplefilter("always")
            yield captured
        captured.extend(f"warning: {w.message}" for w in caught)
    finally:
        logger.removeHandler(handler)
        logger.propagate, logger.level = old_propagate, old_level
        for stream in (out, err):
            text = stream.getvalue()
            # tqdm redraws with carriage returns; keep only each bar's final state
            captured.extend(line.split("\r")[-1].strip() for line in text.splitlines() if line.strip())
        _notes.extend(captured)
        for line in captured:
            _log.debug("coremltools: %s", line)


def coremltools_dir() -> Path | None:
    """Where coremltools is installed, found without importing it (None: not installed)."""
    spec = importlib.util.find_spec("coremltools")
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(list(spec.submodule_search_locations)[0])


def has_native_runtime() -> bool:
    """coremltools ships its Core ML bridge (libcoremlpython) only in macOS wheels; without it
    `MLModel.predict` and `MLComputePlan` raise. Checked on disk so the probe stays instant."""
    root = coremltools_dir()
    return root is not None and any(root.glob("libcoremlpython*"))


def load_coremltools() -> ModuleType:
    """Import coremltools once, silently, timing the import. Raises BackendUnavailable if missing."""
    global _module, _import_seconds
    if _module is not None:
        return _module
    if coremltools_dir() is None:
        raise BackendUnavailable("coremltools is not installed (pip install 'train-pilot[coreml]')")
    start = time.perf_counter()
    with quiet_coremltools():
        import coremltools  # noqa: PLC0415 - deliberately lazy: seconds to import
    _import_seconds = time.perf_counter() - start
    _module = coremltools
    _log.debug("coremltools %s imported in %.2f s", coremltools.__version__, _import_seconds)
    return coremltools


def import_seconds() -> float | None:
    """Wall-clock seconds the coremltools import took in this process (None: not imported yet)."""
    return _import_seconds


def notes() -> list[str]:
    """Everything coremltools logged, warned or printed so far in this process."""
    return list(_notes)
