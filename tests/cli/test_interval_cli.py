"""Predicted times in the CLI come with their 80 % interval: `plan` (table and --json) and `run --json`."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from trainpilot_tui.cli import app

runner = CliRunner()


def test_plan_json_and_table_give_every_predicted_time_an_interval(calibrated_home: Path, dataset_dir: Path) -> None:
    result = runner.invoke(app, ["headless", "plan", "--model", "mlp", "--dataset", str(dataset_dir), "--epochs", "2", "--json", "-q"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    timed = [p for p in data["plans"] if p["predicted_s"] is not None]
    assert timed and all(p["predicted_low_s"] < p["predicted_s"] < p["predicted_high_s"] for p in timed)
    assert all(p["interval_kind"] == "cold" for p in timed)  # nothing ran yet
    chosen = data["chosen"]
    assert chosen["predicted_low_s"] < chosen["predicted_s"] < chosen["predicted_high_s"]
    table = runner.invoke(app, ["headless", "plan", "--model", "mlp", "--dataset", str(dataset_dir), "--epochs", "2", "-q"])
    assert table.exit_code == 0 and "predicted (80 %)" in table.stdout
    assert " s (" in table.stdout or " ms (" in table.stdout  # "2.0 s (1.8–2.3)"


def test_run_json_gives_the_run_and_each_epoch_an_interval(calibrated_home: Path, dataset_dir: Path) -> None:
    result = runner.invoke(app, ["headless", "run", "--model", "mlp", "--dataset", str(dataset_dir), "--epochs", "2", "--json", "-q"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["predicted_low_s"] < data["predicted_s"] < data["predicted_high_s"]
    for epoch in data["epochs"]:
        assert epoch["predicted_low_s"] < epoch["predicted_s"] < epoch["predicted_high_s"]
    assert sum(e["predicted_high_s"] for e in data["epochs"]) == pytest.approx(data["predicted_high_s"])
