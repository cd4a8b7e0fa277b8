"""--memory-format and --precision on `headless run`, `headless plan` and `trainpilot-tui`: bad values
are usage errors, the values reach the SessionConfig / plan_job, and --json carries each plan's
layout and precision. Nothing here depends on what this machine's CPU runs natively (where it would,
the CPU's flags are stood in for)."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from trainpilot import events as ev
from trainpilot.plans import CHANNELS_LAST
from trainpilot_tui import app_main
from trainpilot_tui.cli import app
from trainpilot_tui.cli.options import MEMORY_FORMAT_HELP, PRECISION_HELP

runner = CliRunner()


def one_error_line(result: Any) -> str:
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert "Traceback" not in result.output
    return lines[0]


@pytest.mark.parametrize("command", ["run", "plan"])
@pytest.mark.parametrize(
    ("flag", "value", "words"),
    [
        ("--memory-format", "nhwc", "--memory-format must be one of auto, contiguous, channels_last, got 'nhwc'"),
        ("--precision", "fp64", "--precision must be one of fp32, auto, bf16, fp16, got 'fp64'"),
        ("--precision", "BF16", "--precision must be one of"),
    ],
)
def test_a_bad_value_is_a_usage_error(command: str, flag: str, value: str, words: str) -> None:
    result = runner.invoke(app, ["headless", command, flag, value])
    assert result.exit_code == 2 and result.stdout == ""
    assert words in one_error_line(result)


def test_a_bad_value_in_the_app_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert app_main.main(["--precision", "fp64"]) == 2
    err = capsys.readouterr().err
    assert err.strip() == "error: --precision must be one of fp32, auto, bf16, fp16, got 'fp64'"


def test_settings_do_not_go_with_a_cluster() -> None:
    result = runner.invoke(app, ["headless", "plan", "--cluster", "any.toml", "--memory-format", "channels_last"])
    assert result.exit_code == 2
    assert "--cluster does not go with --memory-format" in one_error_line(result)


@pytest.mark.parametrize("argv", [["headless", "run", "--help"], ["headless", "plan", "--help"]])
def test_help_names_both_options_and_their_defaults(argv: list[str]) -> None:
    result = runner.invoke(app, argv, env={"COLUMNS": "160"})
    assert result.exit_code == 0
    text = " ".join(result.stdout.replace("│", " ").split())  # the help column's wrapped lines, joined
    assert f"--memory-format <str> {MEMORY_FORMAT_HELP} [default: auto]" in text
    assert f"--precision <str> {PRECISION_HELP} [default: fp32]" in text


def test_the_app_takes_both_options(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    launched: list[Any] = []
    monkeypatch.setattr(app_main, "launch", lambda config, **_: launched.append(config) or 0)
    assert app_main.main(["--memory-format", "channels_last", "--precision", "auto"]) == 0
    assert (launched[0].memory_format, launched[0].precision) == ("channels_last", "auto")
    assert app_main.main([]) == 0
    assert (launched[1].memory_format, launched[1].precision) == ("auto", "fp32")  # the defaults


def test_run_passes_both_options_to_the_session(monkeypatch: pytest.MonkeyPatch) -> None:
    configs: list[Any] = []

    class Session:
        def __init__(self, config: Any) -> None:
            configs.append(config)

        def events(self) -> Any:
            yield ev.RunFinished("run", "success", "trained", {"status": "success"})

        def request_stop(self, reason: str = "user") -> None:
            pass

    monkeypatch.setattr("trainpilot.run.session.TrainingSession", Session)
    result = runner.invoke(app, ["headless", "run", "--memory-format", "contiguous", "--precision", "bf16", "-q"])
    assert result.exit_code == 0, result.output
    assert (configs[0].memory_format, configs[0].precision) == ("contiguous", "bf16")


def test_plan_passes_both_options_to_plan_job(monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[dict[str, Any]] = []

    def plan_job(*_args: Any, **kwargs: Any) -> dict[str, Any]:
        asked.append(kwargs)
        return {"chosen": {}, "plans": []}

    monkeypatch.setattr("trainpilot.agent.planning.plan_job", plan_job)
    result = runner.invoke(app, ["headless", "plan", "--precision", "auto", "--json", "-q"])
    assert result.exit_code == 0, result.output
    assert (asked[0]["memory_format"], asked[0]["precision"]) == ("auto", "auto")
    result = runner.invoke(app, ["headless", "plan", "--memory-format=channels_last", "--precision=fp16", "--json"])
    assert result.exit_code == 0, result.output
    assert (asked[1]["memory_format"], asked[1]["precision"]) == ("channels_last", "fp16")


def plan_json(dataset_dir: Path, *options: str) -> dict[str, Any]:
    argv = ["headless", "plan", "--model", "small_cnn", "--dataset", str(dataset_dir), "--epochs", "1", "--json", "-q"]
    result = runner.invoke(app, [*argv, *options])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_plan_json_gives_each_plan_its_layout_and_precision(calibrated_home: Path, dataset_dir: Path) -> None:
    contiguous = plan_json(dataset_dir, "--memory-format", "contiguous")
    assert "memory_format" in contiguous["chosen"] and "precision" in contiguous["chosen"]
    assert contiguous["plans"] and all(p["memory_format"] is None for p in contiguous["plans"])
    assert all(p["precision"] is None for p in contiguous["plans"])  # fp32, the default
    nhwc = plan_json(dataset_dir, "--memory-format", "channels_last")
    cpu = [p for p in nhwc["plans"] if p["backend"] == "cpu"]
    assert cpu and all(p["memory_format"] == CHANNELS_LAST for p in cpu)  # small_cnn convolves 4-D inputs
    assert all("channels_last" in p["label"] for p in cpu)
    assert nhwc["chosen"]["memory_format"] == CHANNELS_LAST or nhwc["chosen"]["backend"] not in ("cpu", "split")


@pytest.mark.parametrize("bf16", [False, True])
def test_an_explicit_precision_reaches_every_cpu_plan(calibrated_home: Path, dataset_dir: Path, monkeypatch, bf16: bool) -> None:
    """bf16 is planned where the CPU has it; where it has not, `plan` is refused with the CPU's reason.
    Both answers are checked on any machine: the CPU's flags stand in for this one's."""
    from trainpilot.machine import precision_support

    flags = {"avx2", "avx512_bf16"} if bf16 else {"avx2"}
    monkeypatch.setattr(precision_support, "cpu_flags", lambda: frozenset(flags))
    argv = ["headless", "plan", "--model", "small_cnn", "--dataset", str(dataset_dir), "--epochs", "1", "--json", "-q"]
    result = runner.invoke(app, [*argv, "--memory-format", "contiguous", "--precision", "bf16"])
    if not bf16:
        assert result.exit_code == 1
        assert "--precision bf16: nothing here runs it natively (this CPU has no native bf16" in one_error_line(result)
        return
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    cpu = [p for p in data["plans"] if p["backend"] == "cpu"]
    assert cpu and all(p["precision"] == "bf16" for p in cpu) and data["chosen"]["precision"] == "bf16"

def test_run_json_gives_the_plan_its_layout(dataset_dir: Path) -> None:
    argv = ["headless", "run", "-m", "small_cnn", "-d", str(dataset_dir), "-e", "1", "--backend", "cpu", "--threads=1"]
    result = runner.invoke(app, [*argv, "--memory-format", "channels_last", "--json", "-q"])
    assert result.exit_code == 0, result.output
    plan = json.loads(result.stdout)["plan"]
    assert plan["memory_format"] == CHANNELS_LAST and plan["precision"] is None
