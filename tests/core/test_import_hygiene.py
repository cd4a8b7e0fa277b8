"""The core never imports a UI library — checked module by module, so an import that only one
module makes (inside the module, at import time) cannot hide behind another's; and
`import trainpilot` does not even import torch.

One fresh interpreter imports every core module in turn and notes what each import added: while no
UI library is loaded, the first module whose import loads one is named (it or what it imports).
One interpreter, not one per module: 168 interpreters each importing torch took over 1.5 minutes
of the suite on 2 cores."""

from __future__ import annotations

import pkgutil
import subprocess
import sys

import pytest

import trainpilot

UI_LIBRARIES = {"textual", "rich", "typer", "trainpilot_tui"}
CORE_MODULES = sorted(m.name for m in pkgutil.walk_packages(trainpilot.__path__, "trainpilot."))


def _modules_after(code: str) -> set[str]:
    out = subprocess.run(
        [sys.executable, "-c", code + "\nimport sys; print(' '.join(sys.modules))"], capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    return set(out.stdout.split())


def test_every_core_module_is_listed():
    assert len(CORE_MODULES) > 100 and "trainpilot.run.session" in CORE_MODULES


PER_MODULE = """
import importlib, json, sys
ui = set(json.loads(sys.argv[1]))
added = {}
for name in json.loads(sys.argv[2]):
    before = set(sys.modules)
    importlib.import_module(name)
    new = {m.split(".")[0] for m in set(sys.modules) - before} & ui
    if new:
        added[name] = sorted(new)
        break  # once loaded, a UI library would not show as new for the next modules
print(json.dumps(added))
"""


def test_no_core_module_imports_a_ui_library():
    import json

    out = subprocess.run(
        [sys.executable, "-c", PER_MODULE, json.dumps(sorted(UI_LIBRARIES)), json.dumps(CORE_MODULES)],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout.strip().splitlines()[-1]) == {}


def test_import_trainpilot_is_light():
    loaded = _modules_after("import trainpilot")
    assert "torch" not in loaded


def test_cli_help_does_not_import_torch():
    loaded = _modules_after("import trainpilot_tui.cli")
    assert "torch" not in loaded


def test_entry_points_import_in_any_order():
    """`trainpilot-tui` imports app_main first, `trainpilot` the CLI first: neither may cycle."""
    for first in ("trainpilot_tui.app_main", "trainpilot_tui.cli.commands", "trainpilot_tui.entry"):
        _modules_after(f"import {first}")
