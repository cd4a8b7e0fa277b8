"""Ctrl-C and SIGTERM: finish the step, checkpoint, say so in one line, exit 130 / 143; the run
resumes from the exact step and ends where an uninterrupted run ends."""
from __future__ import annotations

import json
import signal

import pytest

from reliability_run import RUN_ARGS, assert_same_state
from faultkit.procs import RunningCli, is_step_of_epoch
from trainpilot.run.checkpoint import load_checkpoint
from trainpilot_tui.cli import main


@pytest.mark.parametrize("signum, code, name", [(signal.SIGINT, 130, "SIGINT"), (signal.SIGTERM, 143, "SIGTERM")])
def test_signal_checkpoints_the_step_and_exits_with_its_code(small_dataset, reference_state, trainpilot_home, capsys, signum, code, name):
    run = RunningCli(["headless", "run", *RUN_ARGS, "--dataset", str(small_dataset), "--jsonl", "-q"], trainpilot_home)
    run.wait_for(is_step_of_epoch(2))
    run.signal(signum)
    assert run.finish() == code
    finished = run.events[-1]
    assert finished["kind"] == "RunFinished" and finished["status"] == "interrupted"
    saved = [e for e in run.events if e["kind"] == "CheckpointSaved" and e["reason"] == "interrupt"]
    assert len(saved) == 1 and saved[0]["epoch"] == 1 and saved[0]["step"] > 0  # mid-epoch 2
    run_id = finished["run_id"]
    # A clear message on stderr, no traceback.
    assert f"interrupted: stopped ({name}) at epoch 2, step {saved[0]['step']}; resume with --resume {run_id}" in run.stderr
    assert "Traceback" not in run.stderr

    state = load_checkpoint(trainpilot_home / "runs" / run_id)
    assert (state["epoch"], state["step"]) == (1, saved[0]["step"])

    # Resume from that very step (in this process: the same code as the command).
    assert main(["headless", "run", "--resume", run_id, "--backend", "cpu", "--threads", "1", "--json", "-q"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["status"] == "success" and [e["epoch"] for e in result["epochs"]] == [1, 2, 3]
    assert_same_state(load_checkpoint(trainpilot_home / "runs" / run_id), reference_state)
