"""`trainpilot headless plan / history / calibrate`: exit codes and --json are an API."""
from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from trainpilot.backends import probe
from trainpilot.plans import Plan
from trainpilot.predict.history import History, RunRecord
from trainpilot_tui.cli import app

ROOT = Path(__file__).resolve().parents[2]
runner = CliRunner()


def test_plan_json_on_this_machine(calibrated_home: Path, dataset_dir: Path) -> None:
    result = runner.invoke(app, ["headless", "plan", "--model", "mlp", "--dataset", str(dataset_dir), "--epochs", "2", "--json", "-q"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    chosen = data["chosen"]
    for key in ("backend", "threads", "predicted_s", "confidence", "margin", "policy", "label"):
        assert key in chosen
    assert chosen["backend"] == "cpu" and chosen["policy"] == "cost-model" and 0.5 <= chosen["confidence"] <= 0.99
    cpu = [p for p in data["plans"] if p["backend"] == "cpu" and p["mode"] is None]
    assert {p["threads"] for p in cpu} >= {1} and all(p["predicted_s"] > 0 for p in cpu)
    compiled = [p for p in data["plans"] if p["mode"] == "compiled"]  # listed, and why they cannot be predicted yet
    assert {p["threads"] for p in compiled} == {p["threads"] for p in cpu} and all("calibrate --compile" in p["excluded"] for p in compiled)
    assert sum(p["chosen"] for p in data["plans"]) == 1
    excluded = [p for p in data["plans"] if p["excluded"]]
    assert all(p["predicted_s"] is None for p in excluded)  # unavailable backends say why, never 0
    for key in ("busy_cores", "cpu_utilization", "per_core", "machine_id"):
        assert key in data["observation"]
    assert data["workload"]["epochs"] == 2 and data["thinking_ms"] < 100
    assert any(line.startswith("margin:") or line.startswith("only ") for line in data["reasoning"])
    assert not data["calibrated_now"]


def test_plan_table_names_every_plan_and_the_choice(calibrated_home: Path) -> None:
    result = runner.invoke(app, ["headless", "plan", "-m", "small_cnn", "-e", "1"])
    assert result.exit_code == 0, result.output
    assert "cpu×1" in result.stdout and "decision:" in result.stdout and "confidence" in result.stdout
    assert "ane: not Apple Silicon" in result.stdout  # ane / mps / cuda on this machine, with the reason


def test_plan_for_a_described_machine(trainpilot_home: Path) -> None:
    result = runner.invoke(app, ["headless", "plan", "-m", "large_dense", "--hardware", str(ROOT / "profiles" / "apple-m2.toml"), "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["described"] and data["observation"]["note"] == "predicted for a described machine"
    assert {p["backend"] for p in data["plans"]} >= {"cpu", "mps", "ane"}
    assert "predicted for a described machine" in data["reasoning"][0]
    assert not (trainpilot_home / "history.sqlite3").exists()  # nothing learnt about a machine that is not here


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["--model", "no_such_model"], 1, "unknown model"),
        (["--hardware", "/no/such/profile.toml"], 1, "hardware profile not found"),
        (["--dataset", "/no/such/dir"], 1, "/no/such/dir"),
        (["--epochs", "0"], 2, "--epochs"),
        (["--no-such-option"], 2, "No such option"),
    ],
)
def test_plan_errors_are_one_line(calibrated_home: Path, args: list[str], code: int, message: str) -> None:
    result = runner.invoke(app, ["headless", "plan", *args])
    assert result.exit_code == code
    assert message in result.output
    assert "Traceback" not in result.output


def _add_runs(home: Path, n: int) -> None:
    history = History(home / "history.sqlite3")
    machine = probe(include_backends=False).machine_id
    for i in range(n):
        history.add(RunRecord(f"run-{i}", time.time() + i, machine, "fp", {"model": "mlp", "dataset_size": 100, "batch_size": 32},
                              Plan("cpu", threads=1), 0.5, 25.0, 2.0, 2.5, "success", 3, 3))


def test_history_lists_predicted_vs_actual(trainpilot_home: Path) -> None:
    empty = runner.invoke(app, ["headless", "history"])
    assert empty.exit_code == 0 and "no runs recorded yet" in empty.output
    _add_runs(trainpilot_home, 3)
    table = runner.invoke(app, ["headless", "history"])
    assert table.exit_code == 0 and "run-2" in table.stdout and "-20%" in table.stdout
    as_json = runner.invoke(app, ["headless", "history", "--json", "--limit", "2"])
    runs = json.loads(as_json.stdout)
    assert [r["run_id"] for r in runs] == ["run-2", "run-1"]
    assert runs[0]["predicted_s"] == 2.0 and runs[0]["actual_s"] == 2.5 and runs[0]["error"] == pytest.approx(-0.2)
    assert runner.invoke(app, ["headless", "history", "--limit", "0"]).exit_code == 2


def test_history_sets_a_damaged_file_aside(trainpilot_home: Path) -> None:
    (trainpilot_home / "history.sqlite3").write_text("garbage" * 500)
    result = runner.invoke(app, ["headless", "history", "--json"])
    assert result.exit_code == 0
    assert json.loads(result.stdout) == []
    assert "starting a fresh history" in result.output


def test_calibrate_quick_stores_a_calibration(trainpilot_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from trainpilot.predict import calibrate, microbench

    # Three of the quick suite's networks keep this CLI test short; the full command path runs.
    monkeypatch.setattr(calibrate, "QUICK_SUITE", tuple(microbench.QUICK_SUITE[i] for i in (0, 2, 4)))
    result = runner.invoke(app, ["headless", "calibrate", "--quick", "--json", "-q"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["quick"] and data["machine_id"] == probe(include_backends=False).machine_id
    assert (trainpilot_home / "calibration" / f"{data['machine_id']}.json").exists()
    plans = {p["plan"]["threads"] for p in data["plans"].values()}
    assert 1 in plans
