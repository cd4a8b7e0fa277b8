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


RANKED_JOB = str(ROOT / "tests" / "core" / "parallel" / "distributed" / "ranked_job.py") + ":make_job"


def test_plan_cluster_predicts_a_users_own_job() -> None:
    result = runner.invoke(app, ["headless", "plan", "--cluster", TWO_GPUS, "--job", RANKED_JOB, "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["workload"]["model"] == "blobs" and sum(r["share"] for r in data["ranks"]) == 64


def _a_measured_loopback(monkeypatch: pytest.MonkeyPatch) -> None:
    from trainpilot.parallel import link

    # the real probe runs in tests/core/parallel/test_cluster.py; here only what the plan does with it
    monkeypatch.setattr(link, "measure_loopback", lambda: link.Link(5e8, 2e-4, "measured: gloo (test)", startup_s=3.0))


def test_plan_nproc_puts_a_jobs_ranks_beside_the_single_process_plans(calibrated_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _a_measured_loopback(monkeypatch)
    result = runner.invoke(app, ["headless", "plan", "--job", RANKED_JOB, "--nproc", "2", "-e", "1", "--json", "-q"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    ranks = data["ranks"]
    multi = ranks["multi"]
    assert len(multi["ranks"]) == 2 and sum(multi["shares"]) == 64 and ranks["chosen"] in ("multi", "single")
    # the start-up: the loopback group (no launch recorded in this home yet) and the job's own preparation, once per rank
    assert multi["startup_s"] > 3.0 and "no launch recorded yet" in multi["link"]["source"] and "preparing the job" in multi["link"]["source"]
    assert ranks["single"]["predicted_s"] == min(p["predicted_s"] for p in data["plans"] if p["predicted_s"] is not None and p["backend"] != "split")
    table = runner.invoke(app, ["headless", "plan", "--job", RANKED_JOB, "--nproc", "2", "-e", "1", "-q"])
    assert table.exit_code == 0, table.output
    assert "2 ranks (cpu×1 each)" in table.stdout and "best single process:" in table.stdout and "→ the agent" in table.stdout
    assert max(len(line) for line in table.stdout.splitlines()) <= 80


@pytest.mark.parametrize(("extra", "said"), [(["--nproc", "1"], "at least 2"), (["--nproc", "2", "--hardware", "apple-m2"], "--hardware"),
                                             (["--nproc", "2", "--cluster", TWO_GPUS], "--cluster")])
def test_plan_nproc_refusals_are_usage_errors(extra: list[str], said: str) -> None:
    result = runner.invoke(app, ["headless", "plan", "-m", "mlp", *extra])
    assert result.exit_code == 2 and said in result.stderr, result.output


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
