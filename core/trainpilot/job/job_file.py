"""`--job train.py:make_job`: import the user's file and call the function, which returns a Job.

This runs the user's file as Python code with the user's rights, exactly like `python train.py`.
What goes wrong in it is one JobError naming the file and the line where it happened.
"""

from __future__ import annotations

import sys
from pathlib import Path

from trainpilot.errors import JobError
from trainpilot.job.spec import Job
from trainpilot.job.user_code import exception_line, import_file, line_in


def absolute_reference(reference: str) -> str:
    """`file.py:make_job` with the file's absolute path: a run's checkpoint and a compression's
    export find the job again from any directory."""
    path, sep, name = str(reference).rpartition(":")
    return f"{Path(path).expanduser().resolve()}{sep}{name}" if sep and path else str(reference)


def _importable_name(path: Path) -> str | None:
    """The file's own module name (`train` for train.py), when no other module has it: then the
    classes it defines (a Dataset) pickle by a name spawned workers can import, as they would for
    `python train.py`. None: a private name, the file's classes usable in this process only."""
    import importlib.machinery

    stem = path.stem
    if not stem.isidentifier() or stem in sys.builtin_module_names:
        return None
    if stem in sys.modules:  # this file loaded before keeps its name; any other module keeps its own
        loaded = getattr(sys.modules[stem], "__file__", None)
        return stem if loaded and Path(loaded).resolve() == path.resolve() else None
    found = importlib.machinery.PathFinder.find_spec(stem)
    if found is not None and found.origin and Path(found.origin).resolve() != path.resolve():
        return None  # another module of that name on sys.path: never shadow it
    return stem


def load_job(reference: str) -> Job:
    """The Job that `path.py:function` returns."""
    file_part, sep, name = str(reference).rpartition(":")
    if not sep or not file_part:
        raise JobError(f"'{reference}' is not a job reference: write path/to/file.py:make_job")
    path = Path(file_part).expanduser()
    if not path.is_file():
        raise JobError("job file not found", path)
    if not name.isidentifier():
        raise JobError(f"'{name}' is not a function name (expected path.py:make_job)", path)
    # the file's own folder is importable from it, as `python train.py` would make it
    folder = str(path.resolve().parent)
    own_name = _importable_name(path)
    added = folder not in sys.path
    if added:
        sys.path.insert(0, folder)
    try:
        module = import_file(path, "trainpilot_user_job", JobError, with_line=True, name=own_name)
        if own_name is not None:
            added = False  # the folder stays on sys.path: spawned DataLoader workers import the file by it
        make = getattr(module, name, None)
        if make is None:
            raise JobError(f"defines no '{name}'", path)
        if not callable(make):
            raise JobError(f"'{name}' is not a function", path)
        try:
            job = make()
        except JobError as exc:
            raise JobError(exc.problem, path) from exc
        except (Exception, SystemExit) as exc:
            raise JobError(f"{name}() failed ({line_in(exc, path)}): {exception_line(exc)}", path) from exc
    finally:
        if added and folder in sys.path:
            sys.path.remove(folder)
    if not isinstance(job, Job):
        raise JobError(f"{name}() returned {type(job).__name__}, not a trainpilot.Job", path)
    return job
