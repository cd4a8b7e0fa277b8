"""`trainpilot-tui`: the same training options as `trainpilot headless run`, plus --theme and --refresh-hz; usage
errors are one line and exit 2, before any screen opens."""
from __future__ import annotations

import inspect

import pytest

from trainpilot.run.session import SessionConfig
from trainpilot_tui import app_main
from trainpilot_tui.cli.run import run_command

HEADLESS_ONLY = {"as_json", "jsonl", "quiet", "verbose"}  # output formats for scripts; the app is the output
HEADLESS_ONLY |= {"nproc", "timeout", "shares"}  # distributed runs: several processes, no app to show them


def test_it_takes_the_options_of_headless_run_plus_theme_and_refresh() -> None:
    headless = set(inspect.signature(run_command).parameters) - HEADLESS_ONLY
    tui = set(inspect.signature(app_main.tui_command).parameters)
    assert tui == headless | {"theme", "refresh_hz"}  # fails if headless run gains a training option session_config ignores
    for name in headless:  # the very same option objects: help texts and defaults cannot drift
        assert inspect.signature(app_main.tui_command).parameters[name].default is inspect.signature(run_command).parameters[name].default


def test_exit_codes_agree_with_the_cli() -> None:
    from trainpilot_tui.cli import common

    assert (app_main.EXIT_OK, app_main.EXIT_FAILURE, app_main.EXIT_USAGE) == (common.EXIT_OK, common.EXIT_FAILURE, common.EXIT_USAGE)


def test_either_entry_point_imports_first_without_a_cycle() -> None:
    import subprocess
    import sys

    for first in ("trainpilot_tui.app_main", "trainpilot_tui.cli"):
        code = f"import {first}; import trainpilot_tui.app_main as m, trainpilot_tui.cli; assert m.tui_command"
        subprocess.run([sys.executable, "-c", code], check=True)


def test_help_lists_the_options(capsys: pytest.CaptureFixture[str]) -> None:
    assert app_main.main(["--help"]) == 0
    out = capsys.readouterr().out
    for option in ("--model", "--dataset", "--epochs", "--backend", "--threads", "--resume", "--theme", "--refresh-hz"):
        assert option in out


def test_options_become_the_session_config(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[tuple[SessionConfig, str | None, float | None]] = []
    monkeypatch.setattr(app_main, "launch", lambda config, theme=None, refresh_hz=None: seen.append((config, theme, refresh_hz)) or 0)
    code = app_main.main(["--model", "mlp", "--epochs", "2", "--batch-size", "16", "--backend", "cpu", "--threads", "1", "--resume", "RUN1",
                          "--theme", "trainpilot-light", "--refresh-hz", "2.5"])
    assert code == 0
    config, theme, refresh_hz = seen[0]
    assert (config.model, config.epochs, config.batch_size, config.backend, config.threads, config.resume) == ("mlp", 2, 16, "cpu", 1, "RUN1")
    assert theme == "trainpilot-light" and refresh_hz == 2.5
    assert app_main.main(["--model", "mlp"]) == 0 and seen[1][2] is None  # the app's own default (1 Hz)


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--epochs", "0"], "error: --epochs must be at least 1"),
        (["--backend", "tpu"], "error: --backend must be one of"),
        (["--theme", "nope"], "error: unknown theme 'nope'"),
        (["--refresh-hz", "0"], "error: --refresh-hz must be above 0 and at most 10 (got 0)"),
        (["--refresh-hz", "60"], "error: --refresh-hz must be above 0 and at most 10 (got 60)"),
    ],
)
def test_usage_errors_are_one_line_and_exit_2(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert app_main.main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(message) and "\n" not in err and "Traceback" not in err


def test_a_malformed_theme_file_is_one_line_and_exit_2(tmp_path, capsys: pytest.CaptureFixture[str]) -> None:  # type: ignore[no-untyped-def]
    bad = tmp_path / "bad.toml"
    bad.write_text('name = "bad"\nprimary = "#12"\n', encoding="utf-8")
    assert app_main.launch(SessionConfig(), theme=str(bad)) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"error: {bad}: 'primary' is not a colour: '#12'"
