"""trainpilot.huggingface: real `transformers.Trainer.train()` runs on a BERT built from its config (no
download) with `choose` and `TrainPilotCallback`, recorded in a calibrated TRAINPILOT_HOME; the plan <->
TrainingArguments mapping, with the Trainer's accelerator stood in for MPS and CUDA, which this
machine lacks; and a Hugging Face model as a plain Job, trained on the loss it returns."""

from __future__ import annotations

import dataclasses
import subprocess
import sys

import pytest
import torch

from trainpilot.errors import JobError
from trainpilot.huggingface import DECIDED, INSTALL_HINT, training_arguments
from trainpilot.huggingface.mapping import plan_of_arguments, trainer_accelerator
from trainpilot.plans import Plan

transformers = pytest.importorskip("transformers")
pytest.importorskip("accelerate")


pytestmark = pytest.mark.usefixtures("threads_kept")


def tiny_bert(cls=None, **config):
    from transformers import BertConfig, BertForSequenceClassification

    torch.manual_seed(0)
    settings = dict(
        vocab_size=200,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=32,
    )
    return (cls or BertForSequenceClassification)(BertConfig(**{**settings, **config}))


class Tokens(torch.utils.data.Dataset):
    """Dict items as a tokenized data set gives them: input_ids, attention_mask and the label."""

    def __init__(self, n=128, length=16, label_key="labels"):
        g = torch.Generator().manual_seed(0)
        self.x = torch.randint(3, 200, (n, length), generator=g)
        self.y = torch.randint(0, 2, (n,), generator=g)
        self.label_key = label_key

    def __len__(self):
        return len(self.y)

    def __getitem__(self, i):
        item = {"input_ids": self.x[i], "attention_mask": torch.ones_like(self.x[i])}
        return {**item, self.label_key: self.y[i]} if self.label_key else item


def trainer_for(model, data, callback, tmp_path, **kwargs):
    from transformers import Trainer, TrainingArguments
    from transformers.utils import logging

    logging.set_verbosity_error()
    args = TrainingArguments(
        output_dir=str(tmp_path / "out"),
        report_to="none",
        save_strategy="no",
        disable_tqdm=True,
        **{"num_train_epochs": 2, "per_device_train_batch_size": 16, **kwargs},
    )
    return Trainer(model=model, args=args, train_dataset=data, callbacks=[callback])


def runs():
    from trainpilot.backends import probe
    from trainpilot.paths import history_db_path
    from trainpilot.predict.history import History

    # as `trainpilot headless history` reads them: this machine's runs, newest first
    return History(history_db_path()).records(probe(include_backends=False).machine_id)


def test_choose_and_callback_record_a_real_trainer_run(home, tmp_path):
    from trainpilot.huggingface import TrainPilotCallback, choose, last_choice

    model, data = tiny_bert(), Tokens()
    decided = choose(model, data, epochs=2)
    choice = last_choice(model)
    assert tuple(decided) == DECIDED and decided == choice.training_arguments()
    assert decided["use_cpu"] is True and decided["bf16"] is decided["fp16"] is False  # no accelerator; fp32 asked
    assert choice.threads and torch.get_num_threads() == choice.threads
    assert choice.predicted_s > 0 and choice.profile.dataset_size == 128  # nothing held out
    assert choice.profile.batch_size == 8  # TrainingArguments' default: no args= given

    callback = TrainPilotCallback()
    trainer = trainer_for(model, data, callback, tmp_path, per_device_train_batch_size=8, **decided)
    trainer.train()

    [run] = runs()
    assert run.status == "success" and run.run_id == callback.result["run_id"]
    assert run.predicted_s > 0 and run.actual_s > 0 and run.model == "BertForSequenceClassification"
    assert run.epochs_done == 2 and run.epochs == 2
    assert run.plan == Plan("cpu", threads=choice.threads)
    assert callback.result["steps"] == 2 * 16 and callback.notes == []
    assert len(callback.rethinks) == 1  # after the first epoch; none is left to weigh after the last
    logged = [e for e in trainer.state.log_history if any(k.startswith("trainpilot_") for k in e)]
    start, rethink, end = logged
    assert any(line.startswith("decision:") for line in start["trainpilot_trace"])
    assert any("TrainingArguments(use_cpu=True" in line for line in start["trainpilot_trace"])
    assert start["trainpilot_run_id"] == run.run_id and start["trainpilot_predicted_s"] > 0
    assert rethink["trainpilot_moves"] in (True, False) and rethink["step"] == 16
    assert end["trainpilot_status"] == "success" and end["trainpilot_actual_s"] == pytest.approx(run.actual_s)


def test_an_exception_in_train_is_recorded_as_failed(home, tmp_path):
    from transformers import BertForSequenceClassification

    from trainpilot.huggingface import TrainPilotCallback, choose

    class FailsAtThirdStep(BertForSequenceClassification):
        armed = False
        calls = 0

        def forward(self, input_ids=None, attention_mask=None, labels=None):
            if self.armed:
                type(self).calls += 1
                if type(self).calls == 3:
                    raise RuntimeError("boom")
            return super().forward(input_ids=input_ids, attention_mask=attention_mask, labels=labels)

    model, data = tiny_bert(FailsAtThirdStep), Tokens()
    callback = TrainPilotCallback()
    # planned at the Trainer's batch: the callback profiles nothing again, so the third forward is training's
    trainer = trainer_for(model, data, callback, tmp_path, **choose(model, data, epochs=2, batch_size=16))
    FailsAtThirdStep.armed = True
    with pytest.raises(RuntimeError, match="boom"):
        trainer.train()
    [run] = runs()
    assert run.status == "failed" and run.epochs_done == 0 and run.epochs == 2
    assert callback.result["status"] == "failed" and callback.result["steps"] == 2


def test_the_callback_alone_plans_and_records_max_steps(home, tmp_path):
    from trainpilot.huggingface import TrainPilotCallback, last_choice

    model, data = tiny_bert(), Tokens()
    callback = TrainPilotCallback()
    trainer_for(model, data, callback, tmp_path, max_steps=5, gradient_accumulation_steps=2).train()
    [run] = runs()
    assert run.status == "success" and run.predicted_s > 0 and run.actual_s > 0
    assert run.plan.threads == torch.get_num_threads()
    assert callback.result["steps"] == 10  # batches: 5 optimizer steps of 2
    assert run.profile["batch_size"] == 16  # the Trainer's batches, planned from its arguments
    assert last_choice(model) is not None


def tiny_vit():
    from transformers import ViTConfig, ViTForImageClassification

    torch.manual_seed(0)
    config = ViTConfig(
        image_size=32,
        patch_size=4,
        num_channels=3,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        num_labels=10,
    )
    return ViTForImageClassification(config)


class Images(torch.utils.data.Dataset):
    """3x32x32 images and their labels, as an image data set gives them to a Trainer."""

    def __init__(self, n=256):
        g = torch.Generator().manual_seed(0)
        self.x = torch.randn(n, 3, 32, 32, generator=g)
        self.y = torch.randint(0, 10, (n,), generator=g)

    def __len__(self):
        return len(self.y)

    def __getitem__(self, i):
        return {"pixel_values": self.x[i], "labels": self.y[i]}


def _entries(trainer, key):
    return [e for e in trainer.state.log_history if f"trainpilot_{key}" in e]


def test_choose_without_args_says_it_planned_at_a_default_batch(home):
    from trainpilot.huggingface import choose, last_choice

    model, data = tiny_bert(), Tokens()
    choose(model, data, epochs=1)
    defaulted = last_choice(model)
    assert defaulted.profile.batch_size == 8
    [said] = [line for line in defaulted.trace if "TrainingArguments' default" in line]
    assert said.startswith("planned at batch 8") and "args=" in said and "batch_size=" in said
    assert said in defaulted.opening()  # the compact form says it too

    choose(model, data, epochs=1, batch_size=32)
    told = last_choice(model)
    assert told.profile.batch_size == 32 and not any("default" in line for line in told.trace)
    with pytest.raises(ValueError, match="batch_size must be"):
        choose(model, data, batch_size=0)


def test_a_trainer_with_its_own_batch_is_predicted_at_that_batch(home, tmp_path):
    """The README's use: choose() without the arguments (it profiles batch 8), a Trainer that trains
    batches of 64. The callback profiles one batch of 64 when training starts; the prediction is for
    the Trainer's 8 batches of 64, and the epoch-end rethink weighs the same figures."""
    from trainpilot.huggingface import TrainPilotCallback, choose, last_choice

    model, data = tiny_vit(), Images()
    decided = choose(model, data, epochs=2)
    at_eight = last_choice(model)
    assert at_eight.profile.batch_size == 8
    callback = TrainPilotCallback()
    trainer = trainer_for(model, data, callback, tmp_path, per_device_train_batch_size=64, **decided)
    trainer.train()

    [start] = _entries(trainer, "trace")
    assert start["trainpilot_batch_size"] == 64
    assert start["trainpilot_steps"] == trainer.state.global_step == callback.result["steps"] == 2 * 4
    assert any("profiled at batch 8; this Trainer trains batches of 64" in line for line in start["trainpilot_trace"])
    replanned = last_choice(model)
    assert replanned is not at_eight and replanned.profile.batch_size == 64
    # a step of 64 images costs more than a step of 8: the prediction is not 8's step time counted 8 times
    per_step_at_8 = at_eight.predicted_s / (2 * at_eight.profile.steps_per_epoch)
    assert start["trainpilot_predicted_s"] / start["trainpilot_steps"] > 2 * per_step_at_8
    [run] = runs()
    assert run.profile["batch_size"] == 64 and callback.result["batch_size"] == 64
    assert run.predicted_s == pytest.approx(start["trainpilot_predicted_s"])
    [rethink] = _entries(trainer, "rethink")  # after epoch 1 of 2, on the figures at 64
    assert rethink["step"] == 4 and callback.rethinks == [rethink["trainpilot_rethink"]]

    # the trace is the compact opening `headless run` prints: the decision, its table, no per-plan long lines
    trace = start["trainpilot_trace"]
    assert trace[0].startswith("decision: ") and any(line.lstrip().startswith("▸ cpu×") for line in trace)
    assert all(len(line) <= 160 for line in trace)
    assert not any("excluded —" in line for line in trace) and any(line.startswith("n/a here:") for line in trace)
    assert (
        trace[-1].startswith("this Trainer: cpu (") and "batches of 64, 8 training batches (2 epochs of 4)" in trace[-1]
    )


def test_verbose_keeps_the_long_trace(home, tmp_path):
    from trainpilot.huggingface import TrainPilotCallback, choose

    model, data = tiny_bert(), Tokens(n=32)
    decided = choose(model, data, epochs=1, batch_size=16)
    trainer = trainer_for(model, data, TrainPilotCallback(verbose=True), tmp_path, num_train_epochs=1, **decided)
    trainer.train()
    [start] = _entries(trainer, "trace")
    assert any("excluded —" in line for line in start["trainpilot_trace"])  # every plan's own line


def test_a_record_that_fails_is_said_in_the_log_history(home, tmp_path, monkeypatch):
    from trainpilot.hosted.record import HostedRun
    from trainpilot.huggingface import TrainPilotCallback, choose

    def broken(self, status):
        raise OSError("disk full")

    monkeypatch.setattr(HostedRun, "finish", broken)
    model, data = tiny_bert(), Tokens(n=32)
    callback = TrainPilotCallback()
    trainer = trainer_for(model, data, callback, tmp_path, num_train_epochs=1, **choose(model, data, batch_size=16))
    with pytest.warns(RuntimeWarning, match="not recorded as success: OSError: disk full"):
        trainer.train()  # the training itself goes on
    [note] = _entries(trainer, "note")
    assert note["trainpilot_note"].endswith("not recorded as success: OSError: disk full")
    assert callback.notes == [note["trainpilot_note"]] and callback.result is None


def test_the_decided_fields_are_training_arguments(tmp_path):
    """Every field choose() may return exists in TrainingArguments with its type; those this machine
    can run construct TrainingArguments as they are."""
    from transformers import TrainingArguments

    fields = {f.name: f for f in dataclasses.fields(TrainingArguments)}
    plans = [
        (Plan("cpu", threads=2), None),
        (Plan("cpu", threads=2, loader_workers=2, mode="compiled"), None),
        (Plan("cpu", threads=2).with_settings(precision="bf16"), None),
        (Plan("cuda", device="cuda:0").with_settings(precision="bf16"), "cuda"),
        (Plan("mps", device="mps", loader_workers=1).with_settings(precision="fp16"), "mps"),
    ]
    for plan, accelerator in plans:
        decided = training_arguments(plan, accelerator)
        assert tuple(decided) == DECIDED
        for name, value in decided.items():
            assert name in fields and fields[name].init
            assert type(value) is type(fields[name].default), name  # bool for bool, int for int
        if plan.backend == "cpu":
            args = TrainingArguments(output_dir=str(tmp_path), report_to="none", **decided)
            assert args.device.type == "cpu" and args.dataloader_num_workers == (plan.loader_workers or 0)
            assert plan_of_arguments(args, 2) == plan


def test_plans_map_to_training_arguments():
    cpu = training_arguments(Plan("cpu", threads=4), accelerator="cuda")  # a GPU machine may still train on its CPU
    assert cpu["use_cpu"] is True and cpu["dataloader_pin_memory"] is False and cpu["torch_compile"] is False
    cuda = training_arguments(Plan("cuda", device="cuda:0", loader_workers=2).with_settings(precision="bf16"), "cuda")
    assert cuda == {
        "use_cpu": False,
        "dataloader_num_workers": 2,
        "dataloader_pin_memory": True,
        "dataloader_persistent_workers": True,
        "bf16": True,
        "fp16": False,
        "torch_compile": False,
    }
    mps = training_arguments(Plan("mps", device="mps").with_settings(precision="fp16"), "mps")
    assert mps["use_cpu"] is False and mps["fp16"] is True and mps["dataloader_pin_memory"] is False
    assert training_arguments(Plan("cpu", threads=2, mode="compiled"), None)["torch_compile"] is True
    cannot = [
        (Plan("cuda", device="cuda:1"), "cuda"),  # the Trainer takes cuda:0
        (Plan("mps", device="mps"), "cuda"),  # not the accelerator this Trainer takes
        (Plan("cuda", device="cuda:0"), "mps"),  # a Mac's Trainer takes MPS first
        (Plan("cuda", device="cuda:0"), None),  # no accelerator
        (Plan("cpu", threads=2).with_settings(precision="fp16"), None),  # Accelerate leaves CPU fp16 in fp32
        (Plan("cpu", threads=2, memory_format="channels_last"), None),
        (Plan("ane"), None),
        (Plan.split([Plan("cpu", threads=1)] * 2), None),
    ]
    for plan, accelerator in cannot:
        with pytest.raises(ValueError, match="cannot run"):
            training_arguments(plan, accelerator)


def test_the_trainers_accelerator_follows_its_own_order(monkeypatch):
    """MPS first, then CUDA, else none: TrainingArguments._setup_devices' order, with the capability
    probe stood in (this machine has neither)."""
    assert trainer_accelerator() is None
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert trainer_accelerator() == "cuda"
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: True)
    assert trainer_accelerator() == "mps"


def _row(plan: Plan, seconds: float | None, excluded: str | None = None) -> dict:
    return {**plan.to_dict(), "predicted_s": seconds, "excluded": excluded, "energy_j": None, "confidence": 0.7}


def _report(rows, chosen_index=0):
    from trainpilot.job.workload import WorkloadProfile

    workload = WorkloadProfile(
        "m", 10, 1, 1, False, False, 10.0, {"linear": 1}, 60.0, 20.0, 40, 8, (4,), 2, 64, batch_size=8
    )
    return {"chosen": rows[chosen_index], "plans": rows, "trace": ["decision: ..."], "workload": workload.to_dict()}


def test_mps_and_cuda_choices_become_the_trainers_arguments():
    from trainpilot.huggingface.choice import choice_from

    mps = Plan("mps", device="mps").with_settings(precision="fp16")
    rows = [_row(mps, 0.5), _row(Plan("cpu", threads=2), 2.0)]
    on_mac = choice_from(_report(rows), epochs=1, objective="time", accelerator="mps")
    assert on_mac.plan == mps and on_mac.arguments["use_cpu"] is False and on_mac.arguments["fp16"] is True
    assert on_mac.threads is None and on_mac.predicted_s == 0.5

    cuda1, cuda0 = Plan("cuda", device="cuda:1"), Plan("cuda", device="cuda:0").with_settings(precision="bf16")
    rows = [_row(cuda1, 0.3), _row(cuda0, 0.4), _row(Plan("cpu", threads=2), 2.0)]
    on_gpus = choice_from(_report(rows), epochs=1, objective="time", accelerator="cuda")
    assert on_gpus.plan == cuda0 and on_gpus.arguments["bf16"] is True and on_gpus.predicted_s == 0.4
    assert any("cannot run cuda (cuda:1)" in line for line in on_gpus.trace)

    split = Plan.split([Plan("cpu", threads=1)] * 2)
    rows = [_row(split, 0.1), _row(Plan("cpu", threads=1), 0.3), _row(Plan("cpu", threads=2), 0.2)]
    here = choice_from(_report(rows), epochs=1, objective="time", accelerator=None)
    assert here.plan == Plan("cpu", threads=2) and here.arguments["use_cpu"] is True and here.threads == 2


def test_the_rethink_says_where_it_would_move_and_moves_nothing():
    from trainpilot.hosted.record import Expectation, HostedRun
    from trainpilot.hosted.rethink import rethink_hosted
    from trainpilot.huggingface.choice import choice_from

    cpu, cuda = Plan("cpu", threads=2), Plan("cuda", device="cuda:0")
    rows = [_row(cpu, 1.0), _row(cuda, 0.1)]
    choice = choice_from(_report(rows), epochs=1, objective="time", accelerator=None)  # no GPU to run the cuda row
    run = HostedRun(Expectation(cpu, choice.profile, 1.0 / 8, 80.0), "r")
    run.clock.seconds, run.clock.steps = 1.0, 8  # one epoch at the predicted pace
    decision = rethink_hosted(run, choice, lambda plan: True)  # as if a Trainer could run CUDA here
    assert decision.moves and decision.best.plan == cuda and decision.remaining_steps == 72
    assert rethink_hosted(run, choice, lambda plan: plan.backend == "cpu").best is None
    run.clock.steps = 80
    assert rethink_hosted(run, choice, lambda plan: True) is None  # nothing left to move


def test_choose_says_what_to_pass():
    from trainpilot.huggingface import choose

    with pytest.raises(ValueError, match="precision must be one of"):
        choose(tiny_bert(), Tokens(), precision="int8")
    with pytest.raises(ValueError, match="epochs must be"):
        choose(tiny_bert(), Tokens(), epochs=0)


def test_import_works_without_transformers_and_using_it_says_how_to_install():
    code = (
        "import sys; sys.modules['transformers'] = None\n"
        "import trainpilot.huggingface as th\n"
        "try:\n    th.TrainPilotCallback\nexcept ImportError as e:\n    print(e)\n"
        "print(' '.join(m for m in ('textual', 'rich', 'typer') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert INSTALL_HINT in out.stdout
    assert out.stdout.strip().endswith(INSTALL_HINT)  # and no UI library loaded


# ---------------------------------------------------------------- a Hugging Face model as a plain Job


def _first_batch(data):
    from transformers import default_data_collator

    return default_data_collator([data[0], data[1]])


def test_a_model_output_loss_is_the_jobs_default():
    import trainpilot
    from trainpilot.job.objective import resolve_objective

    model, data = tiny_bert(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0), Tokens()
    batch = _first_batch(data)
    objective = resolve_objective(trainpilot.Job(model, data, metric="accuracy"), batch, model)
    assert objective.model_loss_key == "labels" and "model's own loss" in objective.loss_name
    loss, output, target = objective(model, batch)
    assert torch.equal(loss, model(**batch).loss)  # the labels went to the model, which computed its loss
    assert output.shape == (2, 2) and torch.equal(target, batch["labels"])  # the metric reads the logits
    assert objective.metric(output, target) in (0.0, 0.5, 1.0)
    assert objective.metric(model(**batch), target) is not None  # a ModelOutput handed to a metric: its logits


def test_a_model_output_without_a_loss_names_what_to_pass():
    from transformers import BertModel

    import trainpilot
    from trainpilot.job.objective import resolve_objective

    data = Tokens()
    headless = tiny_bert(BertModel)  # no head: returns hidden states, and its forward takes no labels
    objective = resolve_objective(trainpilot.Job(headless, data), _first_batch(data), headless)
    with pytest.raises(JobError, match=r"without a loss: put the labels .* or give loss=.* or step="):
        objective(headless, _first_batch(data))

    unlabelled = Tokens(label_key="y")  # a target key the model's forward does not take
    model = tiny_bert()
    objective = resolve_objective(trainpilot.Job(model, unlabelled), _first_batch(unlabelled), model)
    assert objective.model_loss_key is None
    with pytest.raises(JobError, match="returned a SequenceClassifierOutput without a loss"):
        objective(model, _first_batch(unlabelled))


def test_plain_modules_keep_the_loss_form():
    import trainpilot
    from trainpilot.job.objective import resolve_objective

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = torch.nn.EmbeddingBag(200, 4)

        def forward(self, input_ids, attention_mask):
            return self.emb(input_ids)

    model, data = Net(), Tokens()
    objective = resolve_objective(trainpilot.Job(model, data), _first_batch(data), model)
    assert objective.model_loss_key is None and objective.loss_name.startswith("cross-entropy")
    assert objective(model, _first_batch(data))[0].ndim == 0


def test_a_forward_that_takes_its_target_as_input_and_returns_logits_gets_the_default_loss():
    """Teacher forcing: the forward names `labels` as an input and returns plain logits, no loss of
    its own; the job's default loss applies to them, as it did before models could bring a loss."""
    import trainpilot
    from trainpilot.job.objective import resolve_objective

    class Forced(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = torch.nn.EmbeddingBag(200, 2)
            self.prev = torch.nn.Embedding(2, 2)

        def forward(self, input_ids, attention_mask, labels):
            return self.emb(input_ids) + self.prev(labels)

    model, data = Forced(), Tokens()
    batch = _first_batch(data)
    objective = resolve_objective(trainpilot.Job(model, data), batch, model)
    loss, output, target = objective(model, batch)
    expected = torch.nn.functional.cross_entropy(model(**batch), batch["labels"])
    assert torch.allclose(loss, expected) and torch.equal(target, batch["labels"])
