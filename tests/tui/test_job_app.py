"""`trainpilot-tui --job train.py:make_job`: the app trains the user's job (loaded in the session's
own process, as a user gets it), shows the job's name where it shows a model, and the validation
loss where the zoo's validation accuracy goes when the job has no metric."""
from __future__ import annotations

from pathlib import Path

import pytest

from trainpilot import events as ev
from trainpilot.plans import Plan
from trainpilot.run.process import ProcessSession
from trainpilot.run.session import SessionConfig
from trainpilot_tui.app import TrainPilotApp
from trainpilot_tui.app.screens.run_picker import check_choice, model_name
from trainpilot_tui.app.widgets.epoch_table import FULL, VAL_LOSS, columns, epoch_rows
from trainpilot_tui.cli.options import session_config

from .conftest import wait_until
from .scripted import sample_source, scripted_samples

SIZE = (100, 30)
JOB = """\
import torch
from torch import nn

import trainpilot


def make_job():
    g = torch.Generator().manual_seed(0)
    X = torch.randn(200, 8, generator=g)
    y = X[:, :1] * 2 + 1  # a regression: float targets, MSE, and no metric
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1))
    return trainpilot.Job(model, (X, y), batch_size=32, name="tiny-regression")
"""


@pytest.fixture
def job_ref(tmp_path: Path) -> str:
    path = tmp_path / "train.py"
    path.write_text(JOB, encoding="utf-8")
    return f"{path}:make_job"


async def test_the_app_runs_a_job_file_to_the_end(job_ref: str) -> None:
    config = session_config(model=None, dataset=None, epochs=2, batch_size=None, lr=1e-3, seed=0, backend="auto",
                            threads=None, job=job_ref)
    # no session_factory: the app's default, a session in its own process that loads the job file
    app = TrainPilotApp(config, samples=sample_source(scripted_samples(4)), discover_user_themes=False)
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(pilot, lambda: app.last_status is not None, timeout=90, what="the run to end")
        assert isinstance(app.session, ProcessSession)
        panel = app.main.run_panel
        assert app.last_status == "success", panel.message
        assert len(panel.epochs) == 2 and panel.epochs[-1].accuracy is None
        assert panel.border_title == "Run: tiny-regression on tensors"
        table = panel.query_one("#epoch-table")
        assert VAL_LOSS in table.headers and "Acc" not in table.headers  # type: ignore[attr-defined]
        assert "validation loss" in panel.message


def _epoch(accuracy: float | None, val: float | None, val_loss: float | None = None) -> ev.EpochTimed:
    return ev.EpochTimed("r", 1, 0.5, accuracy, val, 1.0, 1.1, Plan("cpu", threads=1), val_loss=val_loss)


def test_epoch_rows_show_the_metric_or_the_validation_loss() -> None:
    assert columns(compact=False) == FULL
    assert columns(compact=False, metric="r2") == ("Ep", "Loss", "r2", "Val r2", "Pred", "Actual", "Δ", "Plan")
    assert columns(compact=False, metric=None) == ("Ep", "Loss", VAL_LOSS, "Pred", "Actual", "Δ", "Plan")
    assert columns(compact=True, metric=None) == ("Ep", "Loss", VAL_LOSS, "Pred", "Actual", "Δ")
    assert epoch_rows((_epoch(0.5, 0.75),))[0][2:4] == ("50%", "75%")
    assert epoch_rows((_epoch(0.5, 0.75),), metric="r2")[0][2:4] == ("0.5", "0.75")
    full, total = epoch_rows((_epoch(None, None, 0.25),))
    assert full[2] == "0.250" and len(full) == len(total) == 7  # one figure column instead of two
    assert epoch_rows((_epoch(None, None),), compact=True)[0][2] == "n/a"  # events without it yet


def test_the_new_run_picker_keeps_or_leaves_the_job(job_ref: str) -> None:
    base = SessionConfig(model=job_ref, job=job_ref, epochs=2)
    assert model_name(base) == job_ref
    same = check_choice(job_ref, "", "3", base)
    assert isinstance(same, SessionConfig) and same.job == job_ref and same.epochs == 3
    other = check_choice("mlp", "", "3", base)
    assert isinstance(other, SessionConfig) and other.job is None and other.model == "mlp"
    refused = check_choice(job_ref, "/some/data", "3", base)
    assert refused == "a job brings its own data: leave the dataset empty, or pick a model"
