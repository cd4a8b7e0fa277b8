"""A run's bookkeeping never fails the run, and never fails it in silence: what the history lacks,
and why, is in the run's result (and on the CLI's stderr)."""

from __future__ import annotations

import pytest

from trainpilot.job.data import demo_dataset, validate
from trainpilot.run.learning import RunRecorder
from trainpilot.run.session import SessionConfig, run_session


@pytest.fixture(scope="module")
def small_demo():
    full = demo_dataset(n=200)
    return validate(full.X, full.y, "demo")


def test_a_failed_history_write_is_said_in_the_result_and_the_run_still_succeeds(small_demo, monkeypatch, home):
    def broken(self, *args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(RunRecorder, "finish", broken)
    result, _events = run_session(SessionConfig(model="mlp", epochs=1, backend="cpu", threads=1), dataset=small_demo)
    assert result["status"] == "success"
    assert result["not_recorded"] == ["the run's history row and learning: OSError: disk full"]


def test_a_recorded_run_carries_no_note(small_demo, home):
    result, _events = run_session(SessionConfig(model="mlp", epochs=1, backend="cpu", threads=1), dataset=small_demo)
    assert result["status"] == "success" and "not_recorded" not in result
