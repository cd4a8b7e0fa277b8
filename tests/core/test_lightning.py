"""trainpilot.lightning: real `lightning.Trainer.fit` runs on a small LightningModule (an MLP on random
tensors) with `choose` and `TrainPilotCallback`, recorded in a calibrated TRAINPILOT_HOME; and the
plan <-> Trainer mapping, which is all that can be checked of CUDA and MPS on a machine without them."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch

from trainpilot.lightning import INSTALL_HINT, trainer_arguments
from trainpilot.lightning.mapping import best_runnable, plan_of_device, row_for
from trainpilot.plans import Plan

pytestmark = pytest.mark.usefixtures("threads_kept")


def _lightning_classes(fail_at: int | None = None):
    L = pytest.importorskip("lightning")
    from torch.utils.data import DataLoader, TensorDataset

    class MLP(L.LightningModule):
        def __init__(self):
            super().__init__()
            self.net = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 3))

        def training_step(self, batch, batch_idx):
            if fail_at is not None and batch_idx == fail_at:
                raise RuntimeError("boom")
            x, y = batch
            loss = torch.nn.functional.cross_entropy(self.net(x), y)
            self.log("train_loss", loss)
            return loss

        def validation_step(self, batch, batch_idx):
            x, y = batch
            self.log("val_loss", torch.nn.functional.cross_entropy(self.net(x), y))

        def configure_optimizers(self):
            return {"optimizer": torch.optim.SGD(self.parameters(), lr=0.05)}

    class RandomData(L.LightningDataModule):
        def setup(self, stage=None):
            g = torch.Generator().manual_seed(0)
            self.train = TensorDataset(torch.randn(512, 16, generator=g), torch.randint(0, 3, (512,), generator=g))
            self.val = TensorDataset(torch.randn(64, 16, generator=g), torch.randint(0, 3, (64,), generator=g))

        def train_dataloader(self):
            return DataLoader(self.train, batch_size=32, shuffle=True)

        def val_dataloader(self):
            return DataLoader(self.val, batch_size=32)

    return L, MLP, RandomData


def _trainer(L, tmp_path, callback, **kwargs):
    from lightning.pytorch.loggers import CSVLogger

    return L.Trainer(
        max_epochs=2,
        callbacks=[callback],
        logger=CSVLogger(tmp_path / "logs"),
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        **kwargs,
    )


def _runs():
    from trainpilot.backends import probe
    from trainpilot.paths import history_db_path
    from trainpilot.predict.history import History

    # as `trainpilot headless history` reads them: this machine's runs, newest first
    return History(history_db_path()).records(probe(include_backends=False).machine_id)


def test_choose_and_callback_record_a_real_fit(home, tmp_path):
    L, MLP, RandomData = _lightning_classes()
    from trainpilot.lightning import TrainPilotCallback, choose, last_choice

    module, dm = MLP(), RandomData()
    args = choose(module, dm, epochs=2)
    choice = last_choice(module)
    assert set(args) == {"accelerator", "devices"} and args == choice.trainer_arguments()
    assert args == {"accelerator": "cpu", "devices": 1}  # this machine has no accelerator
    assert choice.threads and torch.get_num_threads() == choice.threads
    assert choice.predicted_s > 0 and choice.profile.dataset_size == 512  # nothing held out
    assert choice.loader_workers >= 0

    callback = TrainPilotCallback()
    _trainer(L, tmp_path, callback, **args).fit(module, dm)

    assert torch.get_num_threads() == choice.threads  # a single-device Trainer leaves them
    [run] = _runs()
    assert run.status == "success" and run.run_id == callback.result["run_id"]
    assert run.predicted_s > 0 and run.actual_s > 0
    assert run.epochs_done == 2 and run.epochs == 2 and run.model == "MLP"
    assert run.plan == Plan("cpu", threads=choice.threads)  # the DataLoader loads in the training process
    assert callback.result["steps"] == 2 * 16 and callback.notes == []
    hparams = (tmp_path / "logs" / "lightning_logs" / "version_0" / "hparams.yaml").read_text()
    assert "trainpilot_trace" in hparams and "decision:" in hparams
    assert "trainpilot_status: success" in hparams


def test_a_fit_that_raises_is_recorded_as_failed(home, tmp_path):
    L, MLP, RandomData = _lightning_classes(fail_at=3)
    from trainpilot.lightning import TrainPilotCallback, choose

    module, dm = MLP(), RandomData()
    callback = TrainPilotCallback()
    trainer = _trainer(L, tmp_path, callback, **choose(module, dm))
    with pytest.raises(RuntimeError, match="boom"):
        trainer.fit(module, dm)
    [run] = _runs()
    assert run.status == "failed" and run.epochs_done == 0 and run.epochs == 2
    assert callback.result["status"] == "failed" and callback.result["steps"] == 3


def test_the_callback_alone_plans_and_records(home, tmp_path):
    L, MLP, RandomData = _lightning_classes()
    from trainpilot.lightning import TrainPilotCallback, last_choice

    module, dm = MLP(), RandomData()
    callback = TrainPilotCallback()
    _trainer(L, tmp_path, callback, accelerator="cpu", devices=1, limit_train_batches=4).fit(module, dm)
    [run] = _runs()
    assert run.status == "success" and run.predicted_s > 0 and run.actual_s > 0
    assert run.plan.threads == torch.get_num_threads()
    assert run.profile["dataset_size"] == 4 * 32  # the batches the Trainer trains, not the whole set
    assert last_choice(module) is not None and next(module.parameters()).device.type == "cpu"


def _hparams(tmp_path):
    import yaml

    return yaml.safe_load((tmp_path / "logs" / "lightning_logs" / "version_0" / "hparams.yaml").read_text())


def test_a_fit_on_other_batches_than_choose_profiled_is_predicted_at_them(home, tmp_path):
    L, MLP, RandomData = _lightning_classes()
    from torch.utils.data import DataLoader

    from trainpilot.lightning import TrainPilotCallback, choose, last_choice

    module, dm = MLP(), RandomData()
    args = choose(module, dm, epochs=2)
    assert last_choice(module).profile.batch_size == 32
    callback = TrainPilotCallback()
    _trainer(L, tmp_path, callback, **args).fit(module, train_dataloaders=DataLoader(dm.train, batch_size=128))

    [run] = _runs()
    assert callback.result["batch_size"] == 128 and run.profile["batch_size"] == 128
    assert callback.result["steps"] == 2 * 4 and run.predicted_s > 0
    assert last_choice(module).profile.batch_size == 128
    hparams = _hparams(tmp_path)
    trace = hparams["trainpilot_trace"]
    assert hparams["trainpilot_batch_size"] == 128 and hparams["trainpilot_steps"] == 8
    assert any("profiled at batch 32; this Trainer trains batches of 128" in line for line in trace)
    assert trace[0].startswith("decision: ") and all(len(line) <= 160 for line in trace)
    assert trace[-1].startswith("this fit: cpu (") and "batches of 128, 8 training batches (2 epochs of 4)" in trace[-1]


def test_a_bf16_mixed_fit_is_predicted_in_bf16(home, tmp_path):
    L, MLP, RandomData = _lightning_classes()
    from trainpilot.lightning import TrainPilotCallback, choose

    module, dm = MLP(), RandomData()
    callback = TrainPilotCallback()
    _trainer(L, tmp_path, callback, precision="bf16-mixed", **choose(module, dm)).fit(module, dm)
    [run] = _runs()
    assert run.plan.precision == "bf16" and run.predicted_s > 0  # the row for the precision the fit ran in
    assert any("weighed no bf16 plan" in line for line in _hparams(tmp_path)["trainpilot_trace"])


def test_import_works_without_lightning_and_using_it_says_how_to_install():
    code = (
        "import sys; sys.modules['lightning'] = None\n"
        "import trainpilot.lightning as tl\n"
        "try:\n    tl.TrainPilotCallback\nexcept ImportError as e:\n    print(e)\n"
        "print(' '.join(m for m in ('textual', 'rich', 'typer') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert INSTALL_HINT in out.stdout
    assert out.stdout.strip().endswith(INSTALL_HINT)  # and no UI library loaded


def test_plans_map_to_trainer_arguments():
    assert trainer_arguments(Plan("cpu", threads=4)) == {"accelerator": "cpu", "devices": 1}
    assert trainer_arguments(Plan("cuda", device="cuda:1")) == {"accelerator": "cuda", "devices": [1]}
    assert trainer_arguments(Plan("cuda")) == {"accelerator": "cuda", "devices": [0]}
    assert trainer_arguments(Plan("mps", device="mps")) == {"accelerator": "mps", "devices": 1}
    for plan in (Plan("cpu", threads=2, mode="compiled"), Plan("ane"), Plan.split([Plan("cpu", threads=1)] * 2)):
        with pytest.raises(ValueError):
            trainer_arguments(plan)


def test_a_running_device_maps_back_to_a_plan():
    assert plan_of_device("cpu", 3, 0) == Plan("cpu", threads=3)
    assert plan_of_device(torch.device("cuda", 1), 3, 2) == Plan("cuda", device="cuda:1", loader_workers=2)
    assert plan_of_device("mps", 8, 0) == Plan("mps", device="mps")


def _row(plan: Plan, seconds: float | None, excluded: str | None = None) -> dict:
    return {**plan.to_dict(), "predicted_s": seconds, "excluded": excluded, "energy_j": None}


def test_the_prediction_for_the_plan_a_trainer_runs():
    rows = [
        _row(Plan("cpu", threads=1), 4.0),
        _row(Plan("cpu", threads=4), 2.0),
        _row(Plan("cpu", threads=4, loader_workers=2), 1.5),
        _row(Plan("cuda", device="cuda:0"), 0.5),
        _row(Plan("cuda", device="cuda:1"), None, "busy"),
    ]
    assert row_for(rows, Plan("cpu", threads=4))["predicted_s"] == 2.0
    assert row_for(rows, Plan("cpu", threads=4, loader_workers=2))["predicted_s"] == 1.5
    assert row_for(rows, Plan("cpu", threads=3))["threads"] == 4  # the nearest the agent weighed
    assert row_for(rows, Plan("cuda", device="cuda:0"))["predicted_s"] == 0.5
    assert row_for(rows, Plan("cuda", device="cuda:1")) is None
    assert row_for(rows, Plan("mps", device="mps")) is None


def test_a_choice_lightning_cannot_run_falls_to_the_best_it_can():
    rows = [
        _row(Plan.split([Plan("cpu", threads=1)] * 2), 0.1),
        _row(Plan("cpu", threads=2, mode="compiled"), 0.2),
        _row(Plan("cpu", threads=2), 0.4),
        _row(Plan("cuda", device="cuda:0"), 0.3),
        _row(Plan("mps", device="mps"), None, "not macOS"),
    ]
    assert best_runnable(rows, "time")["backend"] == "cuda"
    assert best_runnable(rows, "energy")["backend"] == "cuda"  # no energy figures: by time
    assert best_runnable(rows[:2], "time") is None


def test_choose_needs_one_training_dataloader():
    L, MLP, _ = _lightning_classes()
    from trainpilot.errors import JobError
    from trainpilot.lightning import choose

    with pytest.raises(JobError, match="no training data"):
        choose(MLP())
    with pytest.raises(JobError, match="one training DataLoader"):
        choose(MLP(), train_dataloader={"a": [1, 2]})


def test_the_optimizer_is_the_modules_own():
    from trainpilot.lightning.choice import first_optimizer, optimizer_factory

    params = [torch.nn.Parameter(torch.zeros(2))]
    sgd = torch.optim.SGD(params, lr=0.1)
    sched = torch.optim.lr_scheduler.StepLR(sgd, 1)
    for configured in (sgd, [sgd], ([sgd], [sched]), {"optimizer": sgd, "lr_scheduler": sched}, [{"optimizer": sgd}]):
        assert first_optimizer(configured) is sgd
    assert first_optimizer(None) is None and first_optimizer([]) is None

    class Module:
        def configure_optimizers(self):
            return {"optimizer": sgd, "lr_scheduler": sched}

    made = optimizer_factory(Module())([torch.nn.Parameter(torch.ones(3))])
    assert type(made) is torch.optim.SGD and made.defaults["lr"] == 0.1 and made is not sgd
