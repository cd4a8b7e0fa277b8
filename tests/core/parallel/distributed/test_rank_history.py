"""A run on ranks is in the history once, under this machine's id, with the launch's prediction."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from typer.testing import CliRunner

from trainpilot.backends import probe
from trainpilot.machine.contention import ExternalCpu
from trainpilot.machine.target_profiles import TargetBackend, TargetMachine
from trainpilot.predict.calibration import save_calibration
from trainpilot.predict.derive import calibration_for_target
from trainpilot.predict.history import History
from trainpilot_tui.cli import app

runner = CliRunner()


@pytest.fixture
def ready_machine(trainpilot_home: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """This machine calibrated (from a written description: the measured calibration has its own
    tests), its loopback as a fixed link (the real probe runs in tests/core/parallel/test_cluster.py)
    and an idle load wherever this process observes one, so `plan --nproc` and the launch predict
    under the same load."""
    from trainpilot.machine import monitor
    from trainpilot.parallel import link

    hw = probe(include_backends=False)
    box = TargetMachine(
        "test box",
        "tests",
        ("tests",),
        "Linux",
        "x86_64",
        hw.logical_cpus,
        hw.logical_cpus,
        8 * 2**30,
        40e9,
        {"cpu": TargetBackend(80e9, 20e9, "fp32")},
    )
    save_calibration(
        replace(calibration_for_target(box), machine_id=hw.machine_id, described=None), trainpilot_home / "calibration"
    )
    monkeypatch.setattr(link, "measure_loopback", lambda: link.Link(5e8, 2e-4, "measured: gloo (test)", startup_s=3.0))
    monkeypatch.setattr(
        monitor, "measure_load", lambda interval=0.3: ExternalCpu(1.0, 0.0, 0.0).as_sample(hw.logical_cpus)
    )
    return trainpilot_home


def test_a_run_on_two_ranks_is_listed_once_with_the_launchs_prediction(ready_machine: Path, ddp_dataset: Path) -> None:
    args = ["-m", "small_cnn", "-d", str(ddp_dataset), "-e", "2", "-q", "--json"]
    planned = runner.invoke(app, ["headless", "plan", *args, "--nproc", "2"])
    assert planned.exit_code == 0, planned.output
    multi = json.loads(planned.stdout)["ranks"]["multi"]

    ran = runner.invoke(app, ["headless", "run", *args, "--nproc", "2"])
    assert ran.exit_code == 0, (ran.output, ran.exception)
    result = json.loads(ran.stdout)
    assert result["status"] == "success" and result["plan"]["mode"] == "ddp-2"
    # every epoch line carries the launch's per-epoch prediction, as `plan --nproc` made it
    planned_epoch = (multi["run_s"] - multi["startup_s"] - multi["warmup_s"]) / 2
    assert [e["predicted_s"] for e in result["epochs"]] == [pytest.approx(planned_epoch, rel=1e-6)] * 2
    assert result["predicted_s"] == pytest.approx(2 * planned_epoch, rel=1e-6)
    launch = result["distributed"]["prediction"]
    assert launch["startup_s"] > 3.0 and "no launch recorded yet" in launch["startup_source"]
    assert launch["shares"] == multi["shares"] and launch["run_s"] > launch["startup_s"] + result["predicted_s"]

    # one row per launch (rank 1 records nothing), under the id this process has, not a rank's
    machine = probe(include_backends=False).machine_id
    (row,) = History(ready_machine / "history.sqlite3").records()
    assert (row.run_id, row.machine_id, row.status) == (result["run_id"], machine, "success")
    assert row.predicted_s == pytest.approx(result["predicted_s"]) and row.actual_s == pytest.approx(result["actual_s"])
    assert row.actual_s > 0
    # listed, not learnt from: the one-process cost model compares rows with one process's roofline
    assert row.learn is False
    listed = runner.invoke(app, ["headless", "history", "--json"])
    assert listed.exit_code == 0, listed.output
    (shown,) = json.loads(listed.stdout)
    assert shown["run_id"] == result["run_id"] and shown["predicted_s"] > 0 and shown["actual_s"] > 0
    assert shown["plan"]["mode"] == "ddp-2"
