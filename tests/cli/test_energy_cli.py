"""--objective and the energy figures on the command line: run --json, plan, history."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from trainpilot_tui.cli import app

runner = CliRunner()


def test_run_json_has_energy_and_history_lists_it(dataset_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import time

    monkeypatch.setenv("TRAINPILOT_CPU_WATTS_PER_CORE", "6")
    started = time.perf_counter()
    result = runner.invoke(app, ["headless", "run", "-m", "mlp", "-d", str(dataset_dir), "-e", "2", "--objective", "energy", "--json", "-q"])
    wall_s = time.perf_counter() - started
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["objective"] == "energy"
    # No RAPL, NVML or macOS sampler on CI machines: the figure is the labelled estimate.
    assert data["energy_source"] == "est.: 6 W per busy core (TRAINPILOT_CPU_WATTS_PER_CORE) x CPU time"
    assert data["energy_j"] > 0 and data["energy_j"] == pytest.approx(sum(e["energy_j"] for e in data["epochs"]))
    # At most the whole machine's cores busy, at 6 W each, for as long as the run took. Not for
    # `actual_s`: that counts the training steps only, while an epoch's energy window also holds its
    # set-up, the step events and the process's other threads (this mlp's epochs are ~5 ms, so those can be
    # most of the window).
    import os

    assert data["energy_j"] <= 6.0 * (os.cpu_count() or 1) * wall_s
    listed = runner.invoke(app, ["headless", "history", "--json"])
    runs = json.loads(listed.stdout)
    assert runs[0]["run_id"] == data["run_id"] and runs[0]["energy_j"] == pytest.approx(data["energy_j"])
    assert runs[0]["energy_source"] == data["energy_source"]
    table = runner.invoke(app, ["headless", "history"], env={"COLUMNS": "200"})
    assert table.exit_code == 0 and " J est." in table.stdout


@pytest.mark.parametrize("command", ["run", "plan"])
def test_a_bad_objective_is_one_line_and_exit_2(command: str) -> None:
    result = runner.invoke(app, ["headless", command, "--objective", "cheapest"])
    assert result.exit_code == 2
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert lines == ["error: --objective must be one of time, energy, edp, got 'cheapest'"]


def test_plan_shows_time_and_energy_for_every_plan_and_follows_the_objective() -> None:
    rows = {}
    for objective in ("time", "energy"):
        result = runner.invoke(app, ["headless", "plan", "--hardware", "linux-cuda-rtx4090", "--objective", objective, "--json"])
        assert result.exit_code == 0, result.output
        rows[objective] = json.loads(result.stdout)
    for row in rows["energy"]["plans"]:
        if row["predicted_s"] is not None:
            assert row["energy_j"] == pytest.approx(row["power_w"] * row["predicted_s"]) and row["energy_source"].startswith("est.")
    by_energy = min((r for r in rows["energy"]["plans"] if r["energy_j"] is not None), key=lambda r: r["energy_j"])
    assert rows["energy"]["chosen"]["label"] == by_energy["label"] and rows["energy"]["objective"] == "energy"
    fastest = min((r for r in rows["time"]["plans"] if r["predicted_s"] is not None), key=lambda r: r["predicted_s"])
    assert rows["time"]["chosen"]["label"] == fastest["label"]
    cuda = next(r for r in rows["energy"]["plans"] if r["backend"] == "cuda")
    assert "450 W cuda power" in cuda["energy_source"]  # the profile's figure, with its source
    table = runner.invoke(app, ["headless", "plan", "--hardware", "linux-cuda-rtx4090", "--objective", "edp"], env={"COLUMNS": "200"})
    assert table.exit_code == 0 and "J est." in table.stdout and "(objective edp)" in table.stdout
