"""The core never imports a UI library; `import trainpilot` does not even import torch."""
from __future__ import annotations

import subprocess
import sys


def _modules_after(code: str) -> set[str]:
    out = subprocess.run([sys.executable, "-c", code + "\nimport sys; print(' '.join(sys.modules))"], capture_output=True, text=True, check=True)
    return set(out.stdout.split())


def test_core_imports_no_ui_library():
    loaded = _modules_after("import trainpilot.run.session, trainpilot.agent.orchestrator, trainpilot.job.workload, trainpilot.job.data, trainpilot.machine.probe, trainpilot.machine.monitor")
    assert not {"textual", "rich", "typer"} & loaded


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
