"""`--job FILE.py:make_job` in `headless run`, `plan`, `compress` and the app's options: a user's own
job runs where a zoo model does, bad input is one `error:` line (exit 1) with the same text Python's
JobError has, nothing is recorded as a success, and mixing --job with the zoo's options is a usage
error (exit 2) naming both."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

import trainpilot
from trainpilot.paths import history_db_path
from trainpilot.predict.history import History
from trainpilot_tui import app_main
from trainpilot_tui.cli import app, main

runner = CliRunner()

JOBS = '''\
import torch
from torch import nn

import trainpilot


def data(n=200):
    g = torch.Generator().manual_seed(0)
    X = torch.randn(n, 8, generator=g)
    return X, (X[:, 0] > 0).long()


def mlp(inputs=8):
    return nn.Sequential(nn.Linear(inputs, 16), nn.ReLU(), nn.Linear(16, 2))


def make_job():
    return trainpilot.Job(mlp(), data(), metric="accuracy", batch_size=32, name="tiny-mlp")


def without_metric():
    return trainpilot.Job(mlp(), data(), batch_size=32, name="no-metric")


def not_a_module():
    return trainpilot.Job("resnet", data())


def non_scalar_loss():
    return trainpilot.Job(mlp(), data(), loss=lambda output, target: (output - 1) ** 2)


def nan_loss():
    return trainpilot.Job(mlp(), data(), loss=lambda output, target: output.sum() * float("nan"))


def empty_data():
    return trainpilot.Job(mlp(), (torch.zeros(0, 8), torch.zeros(0).long()))


def step_without_tensor():
    return trainpilot.Job(mlp(), data(), step=lambda model, batch: 0.5)


def raises():
    X, y = data()
    raise ValueError("no data here")


def wrong_batch():
    return trainpilot.Job(mlp(inputs=9), data())


def small_cnn():
    g = torch.Generator().manual_seed(0)
    y = torch.randint(0, 4, (400,), generator=g)
    X = torch.randn(400, 1, 16, 16, generator=g) * 0.5
    for c in range(4):  # each class a brighter band of rows
        X[y == c, :, c * 4 : (c + 1) * 4, :] += 1.0
    model = nn.Sequential(
        nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(32 * 4 * 4, 4),
    )
    return trainpilot.Job(model, (X, y), metric="accuracy", name="small-cnn-job")
'''
RAISES_LINE = next(i for i, line in enumerate(JOBS.splitlines(), 1) if "raise ValueError" in line)

BAD = {
    "not_a_module": "model must be a torch.nn.Module",
    "non_scalar_loss": "not a scalar",
    "nan_loss": "nan",
    "empty_data": "empty",
    "step_without_tensor": "not a tensor",
    "raises": f"raises() failed (line {RAISES_LINE}): ValueError: no data here",
    "wrong_batch": "mat1 and mat2 shapes cannot be multiplied",
}


@pytest.fixture(scope="module")
def jobs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("jobs") / "train.py"
    path.write_text(JOBS, encoding="utf-8")
    return path


def _error_line(result) -> str:  # type: ignore[no-untyped-def]
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert "Traceback" not in result.output
    return lines[0]


def _successes() -> list[object]:
    path = history_db_path()
    return [r for r in History(path).records()] if path.exists() else []


def test_run_json_on_a_job(jobs: Path) -> None:
    result = runner.invoke(app, ["headless", "run", "--job", f"{jobs}:make_job", "--epochs", "1", "--json", "-q"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["status"] == "success" and data["model"] == "tiny-mlp" and data["job"] == f"{jobs}:make_job"
    assert data["plan"]["backend"] == "cpu" and "loader_workers" in data["plan"]
    assert data["predicted_s"] > 0 and data["actual_s"] > 0 and len(data["epochs"]) == 1
    assert data["metric"] == "accuracy" and data["val_accuracy"] is not None and data["val_loss"] is not None
    assert data["loss_fn"].startswith("cross-entropy")
    assert [r.status for r in _successes()] == ["success"]


def test_a_job_without_a_metric_shows_its_validation_loss(jobs: Path) -> None:
    result = runner.invoke(app, ["headless", "run", "--job", f"{jobs}:without_metric", "--epochs", "1"])
    assert result.exit_code == 0, result.output
    epoch = next(line for line in result.stderr.splitlines() if line.strip().startswith("epoch 1:"))
    assert "acc" not in epoch  # no accuracy to show, and no "None"
    assert "validation loss" in result.stderr


def test_plan_json_on_a_job(jobs: Path) -> None:
    result = runner.invoke(app, ["headless", "plan", "--job", f"{jobs}:make_job", "--epochs", "1", "--json", "-q"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["workload"]["model"] == "tiny-mlp" and data["workload"]["dataset_size"] == 180
    chosen = data["chosen"]
    assert chosen["backend"] == "cpu" and chosen["predicted_s"] > 0 and "loader_workers" in chosen
    assert any(p["chosen"] for p in data["plans"])
    assert not _successes()  # planning trains nothing


@pytest.mark.parametrize("function", list(BAD))
def test_bad_job_is_one_error_line_and_no_success(jobs: Path, function: str) -> None:
    reference = f"{jobs}:{function}"
    result = runner.invoke(app, ["headless", "run", "--job", reference, "--epochs", "1", "--json", "-q"])
    assert result.exit_code == 1, result.output
    line = _error_line(result)
    assert BAD[function].lower() in line.lower()
    data = json.loads(result.stdout)  # --json still gives the failed result
    assert data["status"] == "failed" and data["message"] == line.removeprefix("error: ")
    assert not [r for r in _successes() if r.status == "success"]
    # Python raises a JobError with the very same text
    with pytest.raises(trainpilot.JobError) as caught:
        trainpilot.fit(reference, epochs=1)
    assert str(caught.value) == line.removeprefix("error: ")


def test_make_job_that_raises_names_the_file_and_the_line(jobs: Path) -> None:
    for command in ("run", "plan"):
        result = runner.invoke(app, ["headless", command, "--job", f"{jobs}:raises", "-q"])
        assert result.exit_code == 1, result.output
        line = _error_line(result)
        assert str(jobs) in line and f"line {RAISES_LINE}" in line and "no data here" in line


def test_a_missing_job_file_or_function(jobs: Path, tmp_path: Path) -> None:
    result = runner.invoke(app, ["headless", "run", "--job", f"{tmp_path / 'nope.py'}:make_job", "-q"])
    assert result.exit_code == 1 and "job file not found" in _error_line(result)
    result = runner.invoke(app, ["headless", "plan", "--job", f"{jobs}:make_jobs", "-q"])
    assert result.exit_code == 1 and "defines no 'make_jobs'" in _error_line(result)


QUICK_COMPRESS = ["--threads", "1", "--episodes", "2", "--dense-epochs", "2", "--finetune-steps", "2",
                  "--deploy-epochs", "0.5", "--search-seconds", "0", "--finalists", "1"]


def test_compress_a_cnn_job(jobs: Path, tmp_path: Path) -> None:
    out = tmp_path / "export"
    args = ["--target-speedup", "1.01", "--max-accuracy-drop", "100", "--out", str(out), "--json", "-q"]
    result = runner.invoke(app, ["headless", "compress", "--job", f"{jobs}:small_cnn", *QUICK_COMPRESS, *args])
    assert result.exit_code in (0, 1), result.output  # 1: a re-measurement below 1.01x on a noisy machine
    data = json.loads(result.stdout)
    assert data["model"] == "small-cnn-job" and data["dataset"] == "tensors"
    assert [layer["name"] for layer in data["layers"]] == ["0", "3"] and data["step_time_label"] == "measured"
    if data["deployed"]:
        assert result.exit_code == 0 and (out / "plan.json").exists()
        assert json.loads((out / "plan.json").read_text())["model"]["job"] == f"{jobs}:small_cnn"
    else:
        assert "speed-up" in _error_line(result) and not out.exists()


@pytest.mark.parametrize("function, words", [
    ("without_metric", "compress needs metric='accuracy'"),
    ("raises", f"line {RAISES_LINE}"),
])
def test_compress_refuses_a_job_it_cannot_measure(jobs: Path, tmp_path: Path, function: str, words: str) -> None:
    out = tmp_path / "o"
    args = ["--job", f"{jobs}:{function}", "--threads", "1", "--out", str(out)]
    result = runner.invoke(app, ["headless", "compress", *args])
    assert result.exit_code == 1, result.output
    assert words in _error_line(result) and result.stdout == "" and not out.exists()


@pytest.mark.parametrize(
    "command, extra, named",
    [
        (["headless", "run"], ["--model", "mlp"], "--model"),
        (["headless", "run"], ["--dataset", "somewhere"], "--dataset"),
        (["headless", "run"], ["--layers", "3"], "--layers"),
        (["headless", "run"], ["--batch-size", "16"], "--batch-size"),
        (["headless", "plan"], ["--model", "mlp"], "--model"),
        (["headless", "compress"], ["--dataset", "somewhere"], "--dataset"),
    ],
)
def test_job_with_zoo_options_is_a_usage_error(jobs: Path, command: list[str], extra: list[str], named: str) -> None:
    result = runner.invoke(app, [*command, "--job", f"{jobs}:make_job", *extra])
    assert result.exit_code == 2, result.output
    line = _error_line(result)
    assert "--job" in line and named in line


def test_the_app_takes_job_and_refuses_it_with_model(jobs: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:  # type: ignore[no-untyped-def]
    seen: list[object] = []
    monkeypatch.setattr(app_main, "launch", lambda config, theme=None, refresh_hz=None: seen.append(config) or 0)
    assert app_main.main(["--job", f"{jobs}:make_job", "--epochs", "1"]) == 0
    config = seen[0]
    assert config.job == f"{jobs}:make_job" and config.epochs == 1  # type: ignore[attr-defined]
    assert app_main.main(["--job", f"{jobs}:make_job", "--model", "mlp"]) == 2
    assert "error: --job does not go with --model" in capsys.readouterr().err


def test_help_says_what_make_job_returns() -> None:
    for command in (["headless", "run"], ["headless", "plan"], ["headless", "compress"]):
        result = runner.invoke(app, [*command, "--help"], env={"COLUMNS": "200"})
        assert result.exit_code == 0 and "--job" in result.stdout
        assert "trainpilot.Job" in result.stdout, command
    assert main(["headless", "run", "--job"]) == 2  # the option needs its FILE.py:FUNCTION
