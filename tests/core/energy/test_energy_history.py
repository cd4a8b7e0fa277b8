"""The history records each run's joules and their source, and an older database without those
columns is migrated in place (ALTER TABLE ADD COLUMN), its runs kept."""
from __future__ import annotations

import sqlite3
import time
from pathlib import Path

from trainpilot.plans import Plan
from trainpilot.predict.history import _SCHEMA, History, RunRecord


def record(run_id: str, **extra) -> RunRecord:
    return RunRecord(run_id=run_id, recorded_at=time.time(), machine_id="m", footprint="f", profile={"model": "mlp", "params": 10},
                     plan=Plan("cpu", threads=1), busy_cores=0.0, cpu_percent=1.0, predicted_s=1.0, actual_s=1.1,
                     status="success", epochs=1, epochs_done=1, **extra)


def test_energy_round_trips(tmp_path: Path) -> None:
    history = History(tmp_path / "h.sqlite3")
    history.add(record("a", energy_j=12.3, energy_source="measured: RAPL package"))
    history.add(record("b"))
    by_id = {r.run_id: r for r in history.records()}
    assert (by_id["a"].energy_j, by_id["a"].energy_source) == (12.3, "measured: RAPL package")
    assert by_id["b"].energy_j is None and by_id["b"].to_dict()["energy_source"] is None


def test_an_old_database_without_the_columns_keeps_working(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite3"
    conn = sqlite3.connect(path)
    conn.executescript(_SCHEMA)  # schema 1 as it was before energy was recorded
    conn.execute("PRAGMA user_version = 1")
    conn.execute("INSERT INTO runs (run_id, recorded_at, machine_id, footprint, model, params, flops_per_sample, dataset_size,"
                 " batch_size, profile_json, backend, threads, busy_cores, cpu_percent, predicted_s, actual_s, status, epochs, epochs_done)"
                 " VALUES ('old', 1.0, 'm', 'f', 'mlp', 10, 1.0, 100, 64, '{\"model\": \"mlp\"}', 'cpu', 1, 0, 0, 1.0, 1.0, 'success', 1, 1)")
    conn.commit()
    assert "energy_j" not in {row[1] for row in conn.execute("PRAGMA table_info(runs)")}
    conn.close()

    history = History(path)
    assert not history.notices  # migrated, not set aside
    history.add(record("new", energy_j=5.0, energy_source="est.: 5 W per busy core x CPU time"))
    runs = {r.run_id: r for r in history.records()}
    assert runs["old"].energy_j is None and runs["old"].actual_s == 1.0
    assert runs["new"].energy_j == 5.0
    columns = {row[1] for row in sqlite3.connect(path).execute("PRAGMA table_info(runs)")}
    assert {"energy_j", "energy_source"} <= columns
    History(path)  # opening again finds the columns there: nothing to add, no error


def test_measured_runs_in_the_history_calibrate_the_power_per_plan(tmp_path: Path) -> None:
    from trainpilot.energy import PlanPower, PowerFigures

    history = History(tmp_path / "h.sqlite3")
    history.add(record("a", energy_j=22.0, energy_source="measured: RAPL package"))  # 20 W over 1.1 s
    history.add(record("b", energy_j=99.0, energy_source="est.: 5 W per busy core x CPU time"))
    power = PlanPower.for_machine(history, "m", 2, figures=PowerFigures(5.0, "est.: 5 W per busy core"))
    one = power.watts(Plan("cpu", threads=1))
    assert one.watts == 20.0 and one.source == "measured: RAPL package, 1 run(s) of this plan" and not one.estimated
