"""`headless run --backend split` end to end, and `headless plan --cluster`: table, --json, and a
bad file as one error line with exit 2."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from trainpilot_tui.cli import app

runner = CliRunner()
ROOT = Path(__file__).resolve().parents[2]
TWO_GPUS = str(ROOT / "profiles" / "clusters" / "two-rtx4090-10gbe.toml")


def test_run_on_the_split_backend(dataset_dir) -> None:
    result = runner.invoke(app, ["headless", "run", "-m", "small_cnn", "-d", str(dataset_dir), "-e", "1", "--backend", "split", "--json", "-q"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    plan = dict(data["plan"])
    assert plan.pop("memory_format") in (None, "channels_last")  # the layout the agent predicts faster for small_cnn
    assert data["status"] == "success" and plan == {"backend": "split", "threads": None, "device": None, "mode": "cpu:1+cpu:1", "loader_workers": None, "precision": None}
    history = runner.invoke(app, ["headless", "history", "--json"])
    assert json.loads(history.stdout)[0]["plan"]["mode"] == "cpu:1+cpu:1"


def test_plan_cluster_table_and_json() -> None:
    table = runner.invoke(app, ["headless", "plan", "--cluster", TWO_GPUS, "-m", "mlp"])
    assert table.exit_code == 0, table.output
    assert "all-reduce of" in table.stdout and "scaling out" in table.stdout and "RTX 4090" in table.stdout
    result = runner.invoke(app, ["headless", "plan", "--cluster", TWO_GPUS, "-m", "mlp", "--json"])
    data = json.loads(result.stdout)
    assert data["cluster"]["ranks"] == 2 and len(data["ranks"]) == 2 and isinstance(data["scaling_pays"], bool)
    assert data["step_s"] == pytest.approx(max(r["compute_s"] for r in data["ranks"]) + data["allreduce_s"])


def test_bad_cluster_file_is_one_line_and_exit_2(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text('name = "x"\n[link]\nbandwidth_gb_per_s = 1\nlatency_us = 1\n[[nodes]]\nprofile = "apple-m2"\nranks = 0\n')
    result = runner.invoke(app, ["headless", "plan", "--cluster", str(bad)])
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr.strip().splitlines() == [f"error: {bad}: 'nodes[0].ranks' must be at least 1, got 0"]
    both = runner.invoke(app, ["headless", "plan", "--cluster", TWO_GPUS, "--hardware", "apple-m2"])
    assert both.exit_code == 2 and "does not go with --hardware" in both.stderr


def test_this_machine_in_a_cluster_needs_a_calibration() -> None:
    result = runner.invoke(app, ["headless", "plan", "--cluster", str(ROOT / "profiles" / "clusters" / "this-and-m2-1gbe.toml")])
    assert result.exit_code == 1 and "not calibrated" in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_calibrate_loopback_prints_the_measured_link(monkeypatch: pytest.MonkeyPatch) -> None:
    from trainpilot.parallel import link

    # the real probe runs in tests/core/parallel/test_cluster.py; here only what the command prints
    monkeypatch.setattr(link, "measure_loopback", lambda: link.Link(5e8, 2e-4, "measured: gloo (test)", startup_s=3.0))
    result = runner.invoke(app, ["headless", "calibrate", "--loopback"])
    assert result.exit_code == 0, result.output
    assert "0.50 GB/s, 200 µs latency" in result.stdout and "3.0 s" in result.stdout
    data = json.loads(runner.invoke(app, ["headless", "calibrate", "--loopback", "--json"]).stdout)
    assert data["bandwidth_bytes_per_s"] == 5e8
