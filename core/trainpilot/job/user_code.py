"""Importing a user's Python file (a model class, a make_job function) by its path.

The file runs as Python code with the user's rights, exactly like `python file.py`. Its failure is
the caller's error type, naming the file and, where the traceback reaches it, the line.
"""

from __future__ import annotations

import importlib.util
import sys
import traceback
from pathlib import Path
from types import ModuleType

from trainpilot.errors import TrainPilotError, describe_exception


def exception_line(exc: BaseException) -> str:
    """What a user's file did wrong, in one line: a sys.exit() is named as such, not as SystemExit."""
    if isinstance(exc, SystemExit):
        return f"it called sys.exit({exc.code!r})"
    return describe_exception(exc)


def line_in(exc: BaseException, path: Path) -> str:
    """`line 12` for the deepest frame of the user's file in the traceback ("at import" if none)."""
    line = None
    for frame in traceback.extract_tb(exc.__traceback__):
        try:
            if Path(frame.filename).resolve() == path.resolve():
                line = frame.lineno
        except OSError:
            continue
    return f"line {line}" if line else "at import"


def import_file(
    path: Path, prefix: str, error: type[TrainPilotError], *, with_line: bool = False, name: str | None = None
) -> ModuleType:
    """The module `path` defines, imported under `name`, else a private name (`prefix` + a hash
    of the path)."""
    if not path.is_file():
        raise error("file not found", path)
    module_name = name or f"{prefix}_{abs(hash(str(path.resolve())))}"
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise error("cannot be imported as a Python module", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except (Exception, SystemExit) as exc:  # the user's code: report, don't crash (nor exit with its code)
        sys.modules.pop(module_name, None)
        where = f" ({line_in(exc, path)})" if with_line else ""
        raise error(f"importing it failed{where}: {exception_line(exc)}", path) from exc
    return module
