"""Compressing a user's own trainpilot.Job: a small CNN classifier on (X, y) tensors or a Dataset
of pairs is pruned, exported and rebuilt; what compression cannot measure (no accuracy metric,
token inputs, float targets, a model it cannot trace) is one JobError or WorkloadError saying why."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torch import nn

import trainpilot
from trainpilot.compress import CompressConfig, run_compression
from trainpilot.compress.deploy import load_exported
from trainpilot.compress.user_job import compressible_job
from trainpilot.errors import JobError, WorkloadError

QUICK = dict(episodes=2, search_seconds=0.0, threads=1, batch_size=32, dense_epochs=2, finetune_steps=2,
             deploy_epochs=0.5, search_repeats=3, deploy_repeats=6, finalists=1, predict_on=())
SHAPE = (1, 16, 16)


class TinyCNN(nn.Module):
    def __init__(self, classes: int = 4) -> None:
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                                      nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2))
        self.head = nn.Linear(32 * 4 * 4, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x).flatten(1))


def stripes(n: int = 400) -> tuple[torch.Tensor, torch.Tensor]:
    """Four classes, each a brighter band of rows: learnable in a few steps."""
    g = torch.Generator().manual_seed(0)
    y = torch.randint(0, 4, (n,), generator=g)
    X = torch.randn(n, *SHAPE, generator=g) * 0.5
    for c in range(4):
        X[y == c, :, c * 4 : (c + 1) * 4, :] += 1.0
    return X, y


class Pairs(torch.utils.data.Dataset):
    def __init__(self) -> None:
        self.X, self.y = stripes()

    def __len__(self) -> int:
        return len(self.y)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        return self.X[i], self.y[i]


def test_a_cnn_job_is_compressed_exported_and_rebuilt(tmp_path: Path) -> None:
    job = trainpilot.Job(TinyCNN(), stripes(), metric="accuracy", loss=nn.CrossEntropyLoss(), name="tiny-cnn")
    out = tmp_path / "export"
    config = CompressConfig(job=job, target_speedup=1.01, max_accuracy_drop=100.0, out=str(out), **QUICK)
    report = run_compression(config)
    data = report.to_dict()
    assert data["model"] == "tiny-cnn" and data["dataset"] == "tensors"
    assert {layer["name"] for layer in data["layers"]} == {"features.0", "features.3"}
    assert any("loss is not used" in note for note in data["notes"])  # said, not silently dropped
    assert data["step_time_label"] == "measured" and data["accuracy_dense"] is not None
    if report.deployed:  # only a re-measurement below 1.01x may refuse it (the drop allowed: 100 points)
        model = load_exported(out, dense=TinyCNN())
        x = torch.randn(2, *SHAPE)
        assert torch.allclose(model(x), report.tuned.pruned.model.eval()(x), atol=1e-5)
        with pytest.raises(Exception, match="exported from a Job object"):
            load_exported(out)  # a Job object names no file to rebuild it from
    else:
        assert "speed-up" in data["reason"]


JOB_FILE = """\
import torch
from torch import nn

import trainpilot


def make_job():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.Flatten(), nn.Linear(8 * 16 * 16, 4))
    return trainpilot.Job(model, (torch.randn(100, 1, 16, 16), torch.randint(0, 4, (100,))), metric="accuracy")
"""


def test_an_export_of_a_job_file_is_rebuilt_from_that_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from trainpilot.compress.deploy import Tuned, export, plan_document
    from trainpilot.compress.prune import check_prunable, prune

    (tmp_path / "train.py").write_text(JOB_FILE, encoding="utf-8")
    monkeypatch.chdir(tmp_path)  # a relative reference is recorded as an absolute one
    own = compressible_job("train.py:make_job")
    assert own.reference == f"{tmp_path.resolve() / 'train.py'}:make_job"
    dense = own.make_model()
    pruned = prune(dense, check_prunable(dense, SHAPE), {"0": 0.5}, SHAPE)
    tuned = Tuned(pruned, 0.5)
    out = tmp_path / "export"
    export(out, tuned, plan_document(own.model_document, SHAPE, own.num_classes, tuned, {}), SHAPE, mlpackage=False)
    monkeypatch.chdir(Path(__file__).parent)
    model = load_exported(out)
    x = torch.randn(2, *SHAPE)
    assert pruned.kept["0"] == 4 and torch.allclose(model(x), pruned.model.eval()(x), atol=1e-5)


def test_a_dataset_of_pairs_is_read_into_memory() -> None:
    own = compressible_job(trainpilot.Job(TinyCNN, Pairs(), metric="accuracy"))
    assert len(own.data) == 400 and tuple(own.data.X.shape[1:]) == SHAPE and own.num_classes == 4
    assert own.data.y.dtype == torch.int64 and isinstance(own.make_model(), TinyCNN)


class Tokens(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed, self.head = nn.Embedding(50, 8), nn.Linear(8, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.embed(x).mean(1))


@pytest.mark.parametrize(
    "make, words",
    [
        (lambda: trainpilot.Job(TinyCNN(), stripes()), "compress needs metric='accuracy'"),
        (lambda: trainpilot.Job(Tokens(), (torch.randint(0, 50, (100, 6)), torch.randint(0, 2, (100,))),
                                metric="accuracy"),
         "compress needs float inputs"),
        (lambda: trainpilot.Job(TinyCNN(), (stripes()[0], torch.rand(400)), metric="accuracy"), "integer class label"),
        (lambda: trainpilot.Job(TinyCNN(classes=2), stripes(), metric="accuracy"), "labels go up to 3"),
        (lambda: trainpilot.Job(nn.Linear(8, 2), stripes(), metric="accuracy"), "cannot take the data's inputs"),
    ],
)
def test_what_compression_cannot_measure_is_one_job_error(make, words: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(JobError, match=words.replace("(", r"\(")) as caught:
        run_compression(CompressConfig(job=make(), **QUICK))
    assert "\n" not in str(caught.value)


def test_a_recurrent_job_is_refused_by_torch_pruning() -> None:
    class Recurrent(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lstm, self.head = nn.LSTM(16, 8, batch_first=True), nn.Linear(8, 4)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.head(self.lstm(x[:, 0])[0][:, -1])

    with pytest.raises(WorkloadError, match="recurrent layers"):
        run_compression(CompressConfig(job=trainpilot.Job(Recurrent(), stripes(), metric="accuracy"), **QUICK))
