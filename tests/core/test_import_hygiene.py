"""The core never imports a UI library — checked module by module, each in a fresh interpreter, so
an import that only one module makes (inside the module, at import time) cannot hide behind
another's; and `import trainpilot` does not even import torch."""

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


@pytest.mark.parametrize("module", CORE_MODULES)
def test_core_module_imports_no_ui_library(module: str):
    loaded = _modules_after(f"import {module}")
    assert not {name.split(".")[0] for name in loaded} & UI_LIBRARIES


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
