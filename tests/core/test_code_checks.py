"""The core passes its linter and its type checker, as configured in pyproject.toml: a check that
runs with the tests, so a finding fails CI instead of piling up."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _tool(name: str) -> str:
    command = shutil.which(name, path=str(Path(sys.executable).parent))
    if command is None:
        pytest.skip(f"{name} is not installed (it comes with the test extra)")
    return command


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(args), cwd=ROOT, capture_output=True, text=True)


def test_ruff_finds_nothing_in_the_core():
    out = _run(_tool("ruff"), "check", "--no-cache", "core")
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-1000:]


def test_the_core_is_formatted():
    out = _run(_tool("ruff"), "format", "--check", "--no-cache", "core")
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-1000:]


def test_mypy_finds_nothing_in_the_core():
    out = _run(_tool("mypy"), "--no-incremental")  # files and settings: [tool.mypy] in pyproject.toml
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-1000:]
