"""SIGKILL mid-epoch and mid-checkpoint: the run resumes and ends exactly where an uninterrupted one does."""
from __future__ import annotations

import errno
import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from reliability_run import RUN_ARGS, assert_same_state
from faultkit.procs import RunningCli, is_step_of_epoch, run_cli
from trainpilot import events as ev
from trainpilot.run.checkpoint import LATEST, load_checkpoint, save_checkpoint
from trainpilot.errors import CheckpointError
from trainpilot.run.session import SessionConfig, run_session


def test_sigkill_mid_epoch_then_resume_equals_uninterrupted(small_dataset, reference_state, trainpilot_home, tmp_path):
    # The seed's entry point is killed; the documented resume command finishes the run.
    # A relative --dataset: the resume below runs from another directory.
    run = RunningCli([*RUN_ARGS, "--dataset", small_dataset.name, "--jsonl", "-q"], trainpilot_home, module="train_orchestrated", cwd=small_dataset.parent)
    first = run.wait_for(lambda e: e.get("kind") == "CheckpointSaved")
    run.wait_for(is_step_of_epoch(2))
    run.signal(signal.SIGKILL)
    assert run.finish() == -signal.SIGKILL
    assert not any(e.get("kind") == "RunFinished" for e in run.events)

    run_id = first["run_id"]
    run_dir = trainpilot_home / "runs" / run_id
    killed_at = load_checkpoint(run_dir)
    assert (killed_at["epoch"], killed_at["step"]) == (1, 0)  # lost at most the epoch in progress

    done = run_cli(["headless", "run", "--resume", run_id, "--backend", "cpu", "--threads", "1", "--json", "-q"], trainpilot_home)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["status"] == "success" and result["run_id"] == run_id
    assert [e["epoch"] for e in result["epochs"]] == [1, 2, 3]
    assert "Traceback" not in done.stderr

    final = load_checkpoint(run_dir / LATEST)
    assert (final["epoch"], final["step"]) == (3, 0)
    assert_same_state(final, reference_state)


KILLER = Path(__file__).parent / "faultkit" / "ckpt_killer.py"


def test_kill_during_checkpoint_writes_never_leaves_a_corrupt_latest(tmp_path):
    done = subprocess.run([sys.executable, str(KILLER), str(tmp_path / "run"), "24", "7"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    kills = [json.loads(line) for line in done.stdout.splitlines()]
    assert len(kills) == 24 and sum(k["aimed"] for k in kills) == 6
    bad = [k for k in kills if not k["ok"]]
    assert not bad, bad
    versions = [k["version"] for k in kills]
    assert versions == sorted(versions)  # never back to an older checkpoint
    # A killed writer leaves its temporary file; the next save clears it.
    assert any(k["temporaries"] for k in kills)
    save_checkpoint(tmp_path / "run", load_checkpoint(tmp_path / "run"))
    assert not list((tmp_path / "run").glob(".*.tmp"))


def test_a_failing_writer_keeps_the_previous_checkpoint(tmp_path, monkeypatch):
    state = _state(1.0)
    save_checkpoint(tmp_path, state)

    def disk_full(obj, handle):
        handle.write(b"PK\x03\x04 partial")
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(torch, "save", disk_full)
    with pytest.raises(CheckpointError, match="cannot write checkpoint.*No space left"):
        save_checkpoint(tmp_path, _state(2.0))
    monkeypatch.undo()
    assert torch.equal(load_checkpoint(tmp_path)["model_state"]["w"], state["model_state"]["w"])
    assert not list(tmp_path.glob(".*.tmp"))


def test_a_writer_killed_between_its_two_renames_leaves_nothing_behind(tmp_path):
    """Killed after previous.pt became a second link to latest.pt but before the new latest.pt was
    renamed in: the next save must not leave its own link file behind (rename() between two links
    of one file is a no-op)."""
    import os

    save_checkpoint(tmp_path, _state(1.0))
    os.link(tmp_path / LATEST, tmp_path / "previous.pt.new")
    os.replace(tmp_path / "previous.pt.new", tmp_path / "previous.pt")  # the state such a kill leaves
    save_checkpoint(tmp_path, _state(2.0))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["latest.pt", "previous.pt"]
    assert float(load_checkpoint(tmp_path / "previous.pt")["model_state"]["w"][0, 0]) == 1.0
    assert float(load_checkpoint(tmp_path)["model_state"]["w"][0, 0]) == 2.0


def test_damaged_latest_resumes_from_previous(small_dataset, trainpilot_home):
    """A bit flipped on disk in latest.pt: the digest catches it and the run resumes one epoch back."""
    config = SessionConfig(dataset=str(small_dataset), model="mlp", epochs=2, batch_size=64, backend="cpu", threads=1, run_id="flip")
    result, _ = run_session(config)
    assert result["status"] == "success"
    latest = trainpilot_home / "runs" / "flip" / LATEST
    raw = bytearray(latest.read_bytes())
    weights = load_checkpoint(latest)["model_state"]["net.0.weight"].numpy().tobytes()
    at = bytes(raw).find(weights[:64])  # inside the first layer's stored weights
    assert at > 0
    raw[at + 3] ^= 0x10
    latest.write_bytes(bytes(raw))
    with pytest.raises(CheckpointError, match="digest"):
        load_checkpoint(latest)

    resumed, events = run_session(SessionConfig(resume="flip", epochs=4, backend="cpu", threads=1))
    assert resumed["status"] == "success", resumed["message"]
    notes = [e.text for e in events if isinstance(e, ev.AgentStepped) and "latest checkpoint unusable" in e.text]
    assert notes and "digest" in notes[0]
    started = next(e for e in events if isinstance(e, ev.SessionStarted))
    assert started.resumed_from_epoch == 1
    assert [e["epoch"] for e in resumed["epochs"]] == [1, 2, 3, 4]


def _state(value: float) -> dict:
    return {
        "model_state": {"w": torch.full((4, 4), value)},
        "optimizer_state": {"state": {}, "param_groups": []},
        "epoch": 1, "step": 0,
        "config": {"model": "mlp", "dataset": "demo", "batch_size": 8, "lr": 1e-3, "seed": 0, "val_fraction": 0.1, "epochs": 2},
    }
