"""A user's own job on two gloo ranks: its Dataset, loss, optimizer and scheduler. After the same
steps the ranks' weights equal one process's on the whole batch (float tolerance), with measured
and with equal shares, for a mean loss and a summed one."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from trainpilot.paths import runs_dir
from trainpilot_tui.cli import app

runner = CliRunner()
JOB = Path(__file__).with_name("ranked_job.py")


def weights(run_id: str) -> dict[str, torch.Tensor]:
    return torch.load(runs_dir() / run_id / "latest.pt", map_location="cpu", weights_only=True)["model_state"]


def relative_diff(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> float:
    assert a.keys() == b.keys()
    return max(float((a[k] - b[k]).abs().max() / b[k].abs().max().clamp_min(1e-12)) for k in a)


def run(*args: str) -> dict:
    result = runner.invoke(app, ["headless", "run", "-e", "2", "--seed", "3", "-q", "--json", "--adapt", "off", *args])
    assert result.exit_code == 0, (result.stderr[-3000:], result.exception)
    return json.loads(result.stdout)


@pytest.mark.parametrize(("function", "shares"), [("make_job", "measured"), ("make_job_sum", "equal")])
def test_a_job_on_two_ranks_steps_as_one_process_does(function: str, shares: str, trainpilot_home: Path) -> None:
    job = f"{JOB}:{function}"
    ranks = run("--job", job, "--nproc", "2", "--shares", shares)
    assert ranks["status"] == "success" and ranks["plan"]["mode"] == "ddp-2" and ranks["model"] == "blobs"
    assert ranks["distributed"]["weight_max_abs_diff_across_ranks"] == 0.0
    assert sum(ranks["distributed"]["speeds"]["shares"]) == 64
    assert all(e["val_accuracy"] is not None and e["accuracy"] is not None for e in ranks["epochs"])
    one = run("--job", job, "--backend", "cpu", "--threads", "1")
    assert relative_diff(weights(ranks["run_id"]), weights(one["run_id"])) < 1e-5
    # the figures are the whole batch's, as one process reports them
    for a, b in zip(ranks["epochs"], one["epochs"]):
        assert a["loss"] == pytest.approx(b["loss"], rel=1e-4) and a["accuracy"] == pytest.approx(b["accuracy"], abs=1e-9)
        # validation shared out among the ranks and gathered: the whole held-out set's figures
        assert a["val_accuracy"] == pytest.approx(b["val_accuracy"], abs=1e-9) and a["val_loss"] == pytest.approx(b["val_loss"], rel=1e-4)


def test_a_wrong_loss_reduction_gives_another_step(trainpilot_home: Path) -> None:
    """A summed loss declared a mean: each rank's sum weighted as a mean's, so on 2 equal ranks the
    step is half the whole batch's (docs/jobs.md says what to declare)."""
    wrong = run("--job", f"{JOB}:make_job_sum_said_mean", "--nproc", "2", "--shares", "equal")
    right = run("--job", f"{JOB}:make_job_sum", "--backend", "cpu", "--threads", "1")
    assert relative_diff(weights(wrong["run_id"]), weights(right["run_id"])) > 1e-3


def test_two_ranks_then_one_process_resumes_the_job(trainpilot_home: Path) -> None:
    """A 2-rank checkpoint of a job resumes on one process: the run goes on as if it never moved."""
    job = f"{JOB}:make_job"
    first = run("--job", job, "--nproc", "2", "-e", "1")
    resumed = run("--job", job, "--resume", first["run_id"], "-e", "2", "--backend", "cpu", "--threads", "1")
    assert resumed["run_id"] == first["run_id"] and [e["epoch"] for e in resumed["epochs"]] == [1, 2]
    one = run("--job", job, "--backend", "cpu", "--threads", "1")
    assert relative_diff(weights(resumed["run_id"]), weights(one["run_id"])) < 1e-5


def test_ranks_that_build_different_models_fail_with_one_line(trainpilot_home: Path) -> None:
    result = runner.invoke(app, ["headless", "run", "--job", f"{JOB}:make_job_per_rank", "--nproc", "2", "-e", "1", "-q"])
    assert result.exit_code == 1, result.output
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "the ranks built different models (0.weight is (32, 16) on rank 0" in errors[0], result.stderr[-2000:]


@pytest.mark.parametrize("function", ["make_job", "make_job_sum"])
def test_the_split_plan_of_a_job_steps_as_one_process_does(function: str, trainpilot_home: Path) -> None:
    """One batch shared by two 1-thread workers in one process (the split plan), the job's own loss
    weighted by its declared reduction: the weights one process gets on the whole batch."""
    job = f"{JOB}:{function}"
    split = run("--job", job, "--backend", "split")
    assert split["plan"]["backend"] == "split" and not split.get("fallback_reason"), split.get("fallback_reason")
    one = run("--job", job, "--backend", "cpu", "--threads", "1")
    assert relative_diff(weights(split["run_id"]), weights(one["run_id"])) < 1e-5


def test_a_job_across_two_torchrun_nodes_on_loopback(trainpilot_home: Path, tmp_path: Path) -> None:
    """Two torchrun launches (`--nnodes 2`, c10d rendezvous on 127.0.0.1), one rank each, of a job
    file: the run succeeds and is recorded once."""
    import os
    import socket
    import subprocess
    import sys

    from trainpilot.predict.history import History

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = dict(os.environ, TMPDIR=str(tmp_path))
    node = [sys.executable, "-m", "torch.distributed.run", "--nnodes", "2", "--nproc-per-node", "1", "--rdzv-backend", "c10d",
            "--rdzv-endpoint", f"127.0.0.1:{port}", "--rdzv-id", "tp-job-test", "-m", "trainpilot_tui", "headless", "run",
            "--job", f"{JOB}:make_job", "-e", "1", "--seed", "3", "-q", "--json", "--adapt", "off"]
    launches = [subprocess.Popen(node, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env) for _ in range(2)]
    outputs = [p.communicate(timeout=180) for p in launches]
    assert all(p.returncode == 0 for p in launches), [err[-1500:] for _, err in outputs]
    printed = [json.loads(out) for out, _ in outputs if out.strip()]
    assert len(printed) == 1  # rank 0's node prints the result, once
    result = printed[0]
    assert result["status"] == "success" and result["distributed"]["world_size"] == 2 and result["model"] == "blobs"
    runs = [r for r in History(trainpilot_home / "history.sqlite3").records() if r.run_id == result["run_id"]]
    assert [r.status for r in runs] == ["success"]
