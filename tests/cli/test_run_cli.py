"""`trainpilot headless run` and `make-dataset`: exit codes and --json are an API."""
from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from trainpilot_tui.cli import app, main

runner = CliRunner()


def test_run_json_schema(dataset_dir):
    result = runner.invoke(app, ["headless", "run", "--model", "mlp", "--dataset", str(dataset_dir), "--epochs", "2", "--json", "-q"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    for key in ("run_id", "status", "backend", "plan", "confidence", "params", "predicted_s", "actual_s", "val_accuracy", "message", "epochs"):
        assert key in data, key
    assert data["status"] == "success" and data["plan"]["backend"] == "cpu" and data["plan"]["threads"] >= 1
    assert len(data["epochs"]) == 2
    assert set(data["epochs"][0]) >= {"epoch", "loss", "accuracy", "val_accuracy", "predicted_s", "actual_s"}


def test_jsonl_streams_every_event(dataset_dir):
    result = runner.invoke(app, ["headless", "run", "-m", "mlp", "-d", str(dataset_dir), "-e", "1", "--jsonl", "-q"])
    assert result.exit_code == 0
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    assert lines[0]["kind"] == "SessionStarted" and lines[-1]["kind"] == "RunFinished"
    assert any(line["kind"] == "AgentStepped" and line["phase"] == "think" for line in lines)


def test_backend_and_threads_options(dataset_dir):
    result = runner.invoke(app, ["headless", "run", "-m", "mlp", "-d", str(dataset_dir), "-e", "1", "--backend", "cpu", "--threads", "1", "--json", "-q"])
    data = json.loads(result.stdout)
    assert data["plan"] == {"backend": "cpu", "threads": 1, "device": None, "mode": None, "loader_workers": None, "memory_format": None, "precision": None}
    result = runner.invoke(app, ["headless", "run", "-m", "mlp", "-d", str(dataset_dir), "-e", "1", "--backend", "ane", "--json", "-q"])
    assert result.exit_code == 0
    data = json.loads(result.stdout)
    assert data["backend"] == "cpu" and data["fallback_reason"].startswith("ane unavailable")


def test_progress_goes_to_stderr_not_stdout(dataset_dir):
    result = runner.invoke(app, ["headless", "run", "-m", "mlp", "-d", str(dataset_dir), "-e", "1"])
    assert result.exit_code == 0
    assert result.stdout == ""
    assert "decision:" in result.stderr and "success" in result.stderr


@pytest.mark.parametrize(
    "args",
    [
        ["headless", "run", "--backend", "tpu"],
        ["headless", "run", "--epochs", "0"],
        ["headless", "run", "--threads", "0"],
        ["headless", "run", "--epochs", "many"],
        ["headless", "run", "--no-such-option"],
        ["headless", "run", "--compile", "--backend", "ane"],  # torch.compile is a CPU plan setting
        ["headless", "calibrate", "--compile", "--quick"],
    ],
)
def test_usage_errors_exit_2(args):
    assert main(args) == 2


def test_failures_exit_1_with_one_line(tmp_path, capsys):
    assert main(["headless", "run", "--dataset", str(tmp_path / "missing"), "-q"]) == 1
    err = capsys.readouterr().err
    assert "no such file or directory" in err and "Traceback" not in err
    assert main(["headless", "run", "--model", "resnet9000", "-q"]) == 1


def test_help_explains():
    result = runner.invoke(app, ["headless", "run", "--help"])
    assert result.exit_code == 0
    for text in ("--backend", "--threads", "--epochs", "--batch-size", "--lr", "--seed", "--json", "Exit codes", "runs with your rights"):
        assert text in result.stdout
