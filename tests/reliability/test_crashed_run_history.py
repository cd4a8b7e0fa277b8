"""`kill -9` of `trainpilot headless run` mid-epoch: the run is still in the history, shown as
crashed with its last checkpoint's epoch and the resume command, and `--resume last` finishes it."""
from __future__ import annotations

import json
import signal

from reliability_run import RUN_ARGS
from faultkit.procs import RunningCli, is_step_of_epoch, run_cli


def _history(home):
    done = run_cli(["headless", "history", "--json"], home)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_a_sigkilled_run_is_listed_as_crashed_and_resume_last_finishes_it(small_dataset, trainpilot_home):
    run = RunningCli(["headless", "run", *RUN_ARGS, "--dataset", str(small_dataset), "--jsonl", "-q"], trainpilot_home)
    started = run.wait_for(lambda e: e.get("kind") == "CheckpointSaved")
    run.wait_for(is_step_of_epoch(2))
    run.signal(signal.SIGSTOP)  # hold it mid-epoch 2 while the history is read
    # While its process lives, the history already lists it as running.
    (live,) = _history(trainpilot_home)
    assert (live["run_id"], live["status"], live["pid"]) == (started["run_id"], "running", run.proc.pid)
    run.signal(signal.SIGKILL)
    assert run.finish() == -signal.SIGKILL

    (crashed,) = _history(trainpilot_home)
    run_id = started["run_id"]
    assert (crashed["run_id"], crashed["status"], crashed["checkpoint_epoch"]) == (run_id, "crashed", 1)
    assert crashed["resume_command"] == f"trainpilot headless run --resume {run_id}"
    table = run_cli(["headless", "history"], trainpilot_home)
    assert table.returncode == 0 and f"{run_id} crashed: resume with `trainpilot headless run --resume {run_id}`" in table.stdout

    done = run_cli(["headless", "run", "--resume", "last", "--backend", "cpu", "--threads", "1", "--json", "-q"], trainpilot_home)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["run_id"] == run_id and result["status"] == "success"
    assert [e["epoch"] for e in result["epochs"]] == [1, 2, 3]
    rows = _history(trainpilot_home)
    assert [(r["run_id"], r["status"], r["resume_command"]) for r in rows] == [(run_id, "success", None), (run_id, "crashed", None)]

    nothing = run_cli(["headless", "run", "--resume", "last", "-q"], trainpilot_home)
    assert nothing.returncode == 1 and nothing.stderr.startswith("error: no run to resume") and "Traceback" not in nothing.stderr
