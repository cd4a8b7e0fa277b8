"""examples/huggingface_trainer.py and examples/huggingface_job.py run as a user runs them, with
`--small`: a real transformers Trainer configured by trainpilot.huggingface, and the same BERT as a
plain Job trained on the loss it returns. Both land in the history."""

from __future__ import annotations

import math

import pytest

from .conftest import EXAMPLES, load_example

pytest.importorskip("transformers")
pytest.importorskip("accelerate")


pytestmark = pytest.mark.usefixtures("threads_kept")


def history():
    from trainpilot.backends import probe
    from trainpilot.paths import history_db_path
    from trainpilot.predict.history import History

    return History(history_db_path()).records(probe(include_backends=False).machine_id)


def test_the_trainer_example_runs_small(tmp_path, capsys):
    metrics = load_example("huggingface_trainer").main(["--small"])
    out = capsys.readouterr().out
    assert "plan: cpu" in out and "status: success" in out
    assert math.isfinite(metrics["eval_loss"]) and 0.0 <= metrics["eval_accuracy"] <= 1.0
    [run] = history()
    assert run.status == "success" and run.model == "BertForSequenceClassification" and run.actual_s > 0


def test_the_job_example_runs_small(capsys):
    import trainpilot
    from trainpilot.job.job_file import load_job

    result = load_example("huggingface_job").main(["--small"])
    out = result.to_dict()
    assert result.status == "success", result.message
    assert math.isfinite(out["loss"]) and math.isfinite(out["val_accuracy"])
    assert "model's own loss" in out["loss_fn"]
    [run] = history()
    assert run.status == "success" and run.model == "bert-marker"
    assert isinstance(load_job(f"{EXAMPLES / 'huggingface_job'}.py:make_job"), trainpilot.Job)  # --job loads it
