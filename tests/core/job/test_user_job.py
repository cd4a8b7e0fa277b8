"""The user's own job through `trainpilot.fit` and `trainpilot.plan`: every data form, every loss
form, the step form, and each bad input (one JobError, nothing recorded as a success)."""

from __future__ import annotations

import math
import pickle
import sys
import threading

import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset, TensorDataset

import trainpilot
from trainpilot.job.prepare import prepare
from trainpilot.predict.history import History

N, FEATURES, CLASSES = 120, 6, 3


def _classes() -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(1)
    X = torch.randn(N, FEATURES, generator=g)
    return X, (X[:, 0] > 0).long() + (X[:, 1] > 1).long()


def mlp(out: int = CLASSES) -> nn.Module:
    return nn.Sequential(nn.Linear(FEATURES, 16), nn.ReLU(), nn.Linear(16, out))


class Pairs(Dataset):
    """A map-style Dataset of (features, label) items, picklable (DataLoader workers may load it)."""

    def __init__(self) -> None:
        self.X, self.y = _classes()

    def __len__(self) -> int:
        return len(self.y)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        return self.X[i], self.y[i]


class Dicts(Pairs):
    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:  # type: ignore[override]
        return {"x": self.X[i], "label": self.y[i]}


class KeywordModel(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.net = mlp()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


def _fit(job: trainpilot.Job, **kw) -> trainpilot.FitResult:
    result = trainpilot.fit(job, epochs=kw.pop("epochs", 1), **kw)
    assert result.ok, result.message
    assert result.actual_s and result.actual_s > 0
    assert math.isfinite(result.to_dict()["loss"])
    return result


# ---------------------------------------------------------------- data forms


def test_tensor_pair_with_accuracy():
    result = _fit(trainpilot.Job(mlp(), _classes(), metric="accuracy", batch_size=32))
    data = result.to_dict()
    assert 0.0 <= data["val_accuracy"] <= 1.0
    assert data["metric"] == "accuracy" and data["loss_fn"].startswith("cross-entropy")
    assert data["plan"]["backend"] == "cpu" and data["predicted_s"] > 0


def test_numpy_pair_keeps_integer_labels_and_makes_float64_float32():
    X, y = _classes()
    result = _fit(trainpilot.Job(mlp, (X.double().numpy(), y.numpy()), batch_size=32))
    assert result.to_dict()["val_accuracy"] is None  # no metric: the validation loss is shown
    assert result.to_dict()["val_loss"] > 0


def test_dataset_and_dataloader_forms():
    _fit(trainpilot.Job(mlp(), Pairs(), metric="accuracy", batch_size=40))
    loader = DataLoader(Pairs(), batch_size=24, shuffle=True, num_workers=0)
    prepared = prepare(trainpilot.Job(mlp(), loader), epochs=1)
    assert prepared.batch_size == 24  # the DataLoader's own batch size is taken
    assert prepared.profile.loader == "workers"  # its worker count is the agent's choice
    _fit(trainpilot.Job(mlp(), loader, metric="accuracy"))


def test_dict_batches_find_their_target():
    _fit(trainpilot.Job(KeywordModel(), Dicts(), metric="accuracy", batch_size=30))


def test_path_form_trains_the_bundled_format(tmp_path):
    from trainpilot.job.data import write_demo_dataset

    folder = write_demo_dataset(tmp_path / "demo", n=200)
    model = nn.Sequential(nn.Flatten(), nn.Linear(28 * 28, 10))
    _fit(trainpilot.Job(model, str(folder), metric="accuracy"))


def test_explicit_validation_data():
    X, y = _classes()
    result = _fit(trainpilot.Job(mlp(), (X[:90], y[:90]), val_data=(X[90:], y[90:]), metric="accuracy"))
    assert result.to_dict()["val_accuracy"] is not None


# ---------------------------------------------------------------- loss, step, optimizer, metric


def test_regression_defaults_to_mse_on_float_targets():
    X = torch.randn(N, FEATURES)
    y = X.sum(dim=1)  # (N,) float targets for a (N, 1) output: lined up, not broadcast
    prepared = prepare(trainpilot.Job(lambda: mlp(1), (X, y)), epochs=1)
    assert prepared.objective.loss_name.startswith("mean squared error")
    first = _fit(trainpilot.Job(lambda: mlp(1), (X, y), batch_size=20), epochs=3)
    epochs = first.to_dict()["epochs"]
    assert epochs[-1]["loss"] < epochs[0]["loss"]


def test_custom_loss_optimizer_scheduler_and_metric():
    seen: list[float] = []

    def loss(output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        return nn.functional.cross_entropy(output, target, label_smoothing=0.1)

    def agreement(output: torch.Tensor, target: torch.Tensor) -> float:
        value = float((output.argmax(1) == target).float().mean())
        seen.append(value)
        return value

    job = trainpilot.Job(
        mlp(),
        _classes(),
        loss=loss,
        optimizer=lambda params: torch.optim.SGD(params, lr=0.05, momentum=0.9),
        scheduler=lambda opt: torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5),
        metric=agreement,
    )
    result = _fit(job, epochs=2)
    assert result.to_dict()["metric"] == "agreement" and seen
    assert result.to_dict()["loss_fn"] == "loss"


def test_step_form_returns_a_tensor_or_a_dict():
    def step(model: nn.Module, batch: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        x, y = batch
        return nn.functional.cross_entropy(model(x), y)

    _fit(trainpilot.Job(mlp(), _classes(), step=step))
    _fit(trainpilot.Job(mlp(), _classes(), step=lambda m, b: {"loss": step(m, b)}))


def test_a_module_trains_in_place():
    model = mlp()
    before = [p.detach().clone() for p in model.parameters()]
    result = _fit(trainpilot.Job(model, _classes()))
    assert result.model is model
    assert any(not torch.equal(a, b) for a, b in zip(before, model.parameters()))


def test_plan_reports_every_plan_with_the_choice():
    report = trainpilot.plan(trainpilot.Job(mlp(), _classes()), epochs=2)
    data = report.to_dict()
    assert data["chosen"]["label"] and 0 <= report.confidence <= 1
    assert any(p["chosen"] for p in report.plans) and report.trace and report.reasoning
    assert data["workload"]["model"] == "Sequential" and data["workload"]["flops_per_sample"] > 0


def test_profile_counts_token_models_with_int64_inputs():
    class Tokens(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.emb = nn.Embedding(50, 8)
            self.head = nn.Linear(8, 2)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.head(self.emb(x).mean(1))

    X = torch.randint(0, 50, (64, 12))
    prepared = prepare(trainpilot.Job(Tokens(), (X, X[:, 0] % 2)), epochs=1)
    assert prepared.profile.input_shape == (12,) and prepared.profile.flops_per_sample > 0
    assert prepared.profile.layer_kinds.get("embedding") == 1


# ---------------------------------------------------------------- data loading as part of the plan


class Unpicklable(Pairs):
    def __init__(self) -> None:
        super().__init__()
        self.lock = threading.Lock()  # a lock cannot be pickled: no worker can receive this dataset


def test_dataset_plans_weigh_loader_workers():
    report = trainpilot.plan(trainpilot.Job(mlp(), Pairs()), epochs=1)
    counts = {p.get("loader_workers") for p in report.plans if p["backend"] == "cpu"}
    assert {None, 1} <= counts
    assert any("loading a batch costs" in line for line in report.trace)


def test_unpicklable_dataset_stays_in_process_with_a_reason():
    with pytest.raises(TypeError):
        pickle.dumps(Unpicklable())
    report = trainpilot.plan(trainpilot.Job(mlp(), Unpicklable()), epochs=1)
    assert all(not p.get("loader_workers") for p in report.plans)
    assert any("cannot be pickled" in line for line in report.trace)


class FailsInWorkers(Pairs):
    """Loads in the training process, raises in a DataLoader worker (a worker that cannot work)."""

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        if torch.utils.data.get_worker_info() is not None:
            raise RuntimeError("this item needs the main process")
        return super().__getitem__(i)


def test_a_failing_loader_worker_falls_back_to_loading_in_process():
    result = trainpilot.fit(trainpilot.Job(mlp(), FailsInWorkers(), workers=1), epochs=1, backend="cpu")
    assert result.ok, result.message
    assert result.plan is not None and not result.plan.loader_workers
    assert "this item needs the main process" in (result.to_dict()["fallback_reason"] or "")


@pytest.mark.parametrize("file_name, loader", [("spawn_job.py", "workers"), ("spawn-job.py", "in-process")])
def test_spawned_workers_load_a_job_files_dataset_when_they_can_import_it(tmp_path, monkeypatch, file_name, loader):
    """A file named like a module is imported by that name, so spawned workers (macOS, Windows, the
    app's training process) can import its Dataset; one that is not cannot, and says why."""
    import multiprocessing

    from trainpilot.job.job_file import load_job

    script = tmp_path / file_name
    script.write_text(
        "import torch, trainpilot\n"
        "class Items(torch.utils.data.Dataset):\n"
        "    def __len__(self): return 40\n"
        "    def __getitem__(self, i): return torch.randn(4), i % 2\n"
        "def make_job():\n"
        "    return trainpilot.Job(torch.nn.Linear(4, 2), Items())\n"
    )
    monkeypatch.setattr(multiprocessing, "get_start_method", lambda allow_none=False: "spawn")
    monkeypatch.setattr(sys, "path", list(sys.path))  # the job's folder stays on it for the workers
    profile = prepare(load_job(f"{script}:make_job"), epochs=1).profile
    assert profile.loader == loader
    assert ("spawn" in profile.loader_note) == (loader == "in-process")


def test_pinned_workers_train_through_a_dataloader():
    result = _fit(trainpilot.Job(mlp(), Pairs(), metric="accuracy", workers=1), backend="cpu", threads=1)
    assert result.plan is not None and result.plan.loader_workers == 1


# ---------------------------------------------------------------- steering, resume


def test_stop_then_resume_continues_the_job():
    from trainpilot import events as ev

    control = trainpilot.Control()

    def stop_after_first_step(event: object) -> None:
        if isinstance(event, ev.StepProgressed):
            control.stop("test")

    job = trainpilot.Job(mlp, _classes(), batch_size=16)
    first = trainpilot.fit(job, epochs=2, on_event=stop_after_first_step, control=control)
    assert first.status == "interrupted"
    resumed = trainpilot.fit(job, resume=first.run_id)
    assert resumed.ok and resumed.run_id == first.run_id and len(resumed.to_dict()["epochs"]) == 2


def test_ctrl_c_during_a_fit_checkpoints_and_stops():
    import os
    import signal

    from trainpilot import events as ev

    sent = []
    control = trainpilot.Control()

    def interrupt_once(event: object) -> None:
        if isinstance(event, ev.StepProgressed) and not sent:
            sent.append(True)
            os.kill(os.getpid(), signal.SIGINT)  # as a terminal's Ctrl-C does
            while not control.stop_requested:  # the handler asks from a thread of its own: wait for it
                pass

    job = trainpilot.Job(mlp, _classes(), batch_size=16)
    before = signal.getsignal(signal.SIGINT)  # Python's default, or SIG_IGN where a shell started us in the background
    result = trainpilot.fit(job, epochs=2, on_event=interrupt_once, control=control)
    assert result.status == "interrupted" and "Ctrl-C" in result.message
    assert result.to_dict()["checkpoint"]
    assert signal.getsignal(signal.SIGINT) is before  # the handler is put back


def test_override_from_another_thread_moves_the_run():
    from trainpilot import events as ev

    control = trainpilot.Control()
    asked = threading.Event()

    def on_event(event: object) -> None:
        if isinstance(event, ev.StepProgressed) and not asked.is_set():
            asked.set()
            worker = threading.Thread(target=control.override, args=("cpu",), kwargs={"threads": 1})
            worker.start()
            worker.join()

    job = trainpilot.Job(mlp(), _classes(), batch_size=8)
    result = trainpilot.fit(job, epochs=1, threads=2, backend="cpu", on_event=on_event, control=control)
    assert result.ok and result.plan == trainpilot.Plan("cpu", threads=1)
    assert result.to_dict()["plan_changes"]


# ---------------------------------------------------------------- bad input


def _history_rows() -> list:
    from trainpilot.paths import history_db_path

    path = history_db_path()
    return History(path).records() if path.exists() else []


BAD_JOBS = {
    "not a module": (lambda: trainpilot.Job("resnet", _classes()), "model must be a torch.nn.Module"),
    "non-scalar loss": (
        lambda: trainpilot.Job(mlp(), _classes(), loss=lambda o, t: (o - 1) ** 2),
        "not a scalar",
    ),
    "nan loss": (lambda: trainpilot.Job(mlp(), _classes(), loss=lambda o, t: o.sum() * float("nan")), "nan"),
    "empty data": (lambda: trainpilot.Job(mlp(), (torch.zeros(0, FEATURES), torch.zeros(0).long())), "empty"),
    "step returns no tensor": (lambda: trainpilot.Job(mlp(), _classes(), step=lambda m, b: 0.5), "not a tensor"),
    "batch the model cannot take": (
        lambda: trainpilot.Job(nn.Linear(FEATURES + 1, 2), _classes()),
        "mat1 and mat2 shapes cannot be multiplied",
    ),
}


@pytest.mark.parametrize("case", list(BAD_JOBS))
def test_bad_input_is_one_job_error_and_no_success(case):
    make, words = BAD_JOBS[case]
    with pytest.raises(trainpilot.JobError) as caught:
        trainpilot.fit(make(), epochs=1)
    text = str(caught.value)
    assert words.lower() in text.lower() and "\n" not in text
    assert not [r for r in _history_rows() if r.status == "success"]


def test_first_batch_error_names_model_structure_and_shapes():
    with pytest.raises(trainpilot.JobError) as caught:
        trainpilot.fit(trainpilot.Job(nn.Linear(FEATURES + 1, 2), _classes()), epochs=1)
    assert "Linear" in str(caught.value) and "(float32[2, 6], int64[2])" in str(caught.value)


def test_make_job_that_raises_names_file_and_line(tmp_path):
    script = tmp_path / "train.py"
    script.write_text("import trainpilot\n\n\ndef make_job():\n    raise ValueError('no data here')\n")
    with pytest.raises(trainpilot.JobError) as caught:
        trainpilot.fit(f"{script}:make_job", epochs=1)
    assert "train.py" in str(caught.value) and "line 5" in str(caught.value) and "no data here" in str(caught.value)


def test_misspelt_field_is_refused_at_once():
    with pytest.raises(trainpilot.JobError, match="metric"):
        trainpilot.Job(mlp(), _classes(), metric="acc")
    with pytest.raises(trainpilot.JobError, match="loss or step"):
        trainpilot.Job(mlp(), _classes(), loss=nn.functional.mse_loss, step=lambda m, b: m(b))
    with pytest.raises(trainpilot.JobError, match="batch_size"):
        trainpilot.Job(mlp(), _classes(), batch_size=0)
