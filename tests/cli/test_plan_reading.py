"""What a person reads from `headless plan` and the start of `headless run`: at 80 columns one
screen (at most 30 rows, none wider than the terminal), each plan once in short form, exclusions
grouped by reason; wider terminals get more columns, never more rows; --verbose and --json keep
every detail."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from trainpilot.job.model_names import ZOO
from trainpilot_tui.cli import app

ROOT = Path(__file__).resolve().parents[2]
runner = CliRunner()
SCREEN_ROWS = 30


def plan_output(args: list[str], columns: int) -> list[str]:
    result = runner.invoke(app, ["headless", "plan", "-q", *args], env={"COLUMNS": str(columns)})
    assert result.exit_code == 0, result.output
    return result.stdout.rstrip("\n").splitlines()


def check_one_screen(lines: list[str], columns: int = 80) -> None:
    assert len(lines) <= SCREEN_ROWS, "\n".join(lines)
    assert all(len(line.rstrip()) <= columns for line in lines), "\n".join(lines)
    assert sum(line.startswith("▸") for line in lines) == 1  # the chosen row, marked once
    assert sum(line.startswith("decision: ") for line in lines) == 1


@pytest.mark.parametrize("model", ZOO)
def test_plan_fits_one_screen_at_80_columns(model: str, calibrated_home: Path, dataset_dir: Path) -> None:
    lines = plan_output(["-m", model, "-d", str(dataset_dir)], 80)
    check_one_screen(lines)
    text = "\n".join(lines)
    compile_lines = [line for line in lines if "torch.compile" in line]
    assert len(compile_lines) == 1 and "compiled plans:" in compile_lines[0]  # one line for all of them
    assert "calibrate --compile" in text  # what lifts it (on the line or the one it wraps onto)
    assert "(1 thread" not in text  # no long label
    if model == "small_cnn":  # one model is enough for the wide form
        wide = plan_output(["-m", model, "-d", str(dataset_dir)], 160)
        assert len(wide) <= len(lines) and "source" in wide[1] and "±error" in wide[1]  # more columns, never more rows


@pytest.mark.parametrize("example", ["cnn_images", "costly_transforms", "regression_mlp", "transformer_tokens"])
def test_plan_of_each_example_fits_one_screen(example: str, calibrated_home: Path) -> None:
    check_one_screen(plan_output(["--job", f"{ROOT / 'examples' / example}.py:make_job", "-e", "1"], 80))


def test_verbose_and_json_keep_every_detail(calibrated_home: Path, dataset_dir: Path) -> None:
    verbose = "\n".join(plan_output(["-m", "small_cnn", "-d", str(dataset_dir), "--verbose"], 80))
    assert "cpu (1 thread)" in verbose and "choice:" in verbose and "excluded" in verbose
    data = json.loads(runner.invoke(app, ["headless", "plan", "-q", "-m", "small_cnn", "-d", str(dataset_dir), "--json"]).stdout)
    assert data["chosen"]["label"].startswith(data["chosen"]["backend"])  # the long label, as before
    assert all(row["label"] and row["short_label"] for row in data["plans"])
    summary = data["summary"]  # what the table shows, for a program that draws its own
    assert {row["short"] for row in summary["rows"]} == {row["short_label"] for row in data["plans"] if row["predicted_s"] is not None}


def test_run_trace_starts_with_the_decision_and_keeps_lines_short(dataset_dir: Path) -> None:
    result = runner.invoke(app, ["headless", "run", "-m", "small_cnn", "-d", str(dataset_dir), "-e", "1"], env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    lines = result.stderr.splitlines()
    assert max(len(line) for line in lines) <= 160, max(lines, key=len)
    decision = next(i for i, line in enumerate(lines) if line.startswith("decision: "))
    table = next(i for i, line in enumerate(lines) if line.lstrip().startswith("plan "))
    first_epoch = next(i for i, line in enumerate(lines) if line.lstrip().startswith("epoch 1:"))
    assert decision < table < first_epoch and decision <= 4  # which plan, how long, how sure: first
    assert not any(line.lstrip().startswith("think cpu (") for line in lines)  # no per-plan lines, no long labels
    verbose = runner.invoke(app, ["headless", "run", "-m", "small_cnn", "-d", str(dataset_dir), "-e", "1", "--verbose"], env={"COLUMNS": "80"})
    assert verbose.exit_code == 0 and any(line.lstrip().startswith("think cpu (1 thread)") for line in verbose.stderr.splitlines())


def test_jsonl_still_carries_every_plan(dataset_dir: Path) -> None:
    result = runner.invoke(app, ["headless", "run", "-m", "mlp", "-d", str(dataset_dir), "-e", "1", "--jsonl", "-q"])
    events = [json.loads(line) for line in result.stdout.splitlines()]
    per_plan = [e for e in events if e["kind"] == "AgentStepped" and e["data"].get("part") == "plan"]
    assert per_plan and all("plan" in e["data"] for e in per_plan)
    decision = next(e for e in events if e["kind"] == "AgentStepped" and "summary" in e["data"])
    assert decision["text"].startswith("decision: ") and decision["data"]["summary"]["rows"]
