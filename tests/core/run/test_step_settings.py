"""Layout and precision as plan settings: the plan's layout reaches the model, its optimizer state
and its inputs; a layout switch mid-run keeps the loss trajectory; a run can be forced to a layout,
overridden into one mid-run, and resumed from a checkpoint written in one."""
from __future__ import annotations

import pytest
import torch

from trainpilot import events as ev
from trainpilot.job.data import demo_dataset, validate
from trainpilot.job.layout import torch_format
from trainpilot.job.models import build_model
from trainpilot.job.prepare import seed_everything
from trainpilot.plans import CHANNELS_LAST, Plan
from trainpilot.run.session import SessionConfig, TrainingSession, run_session
from trainpilot.run.trainer import Trainer

CL = torch.channels_last


def in_layout(model: torch.nn.Module, memory_format: str | None) -> bool:
    """Whether every 4-D parameter of `model` is in `memory_format`."""
    fmt = torch_format(memory_format)
    return all(p.is_contiguous(memory_format=fmt) for p in model.parameters() if p.ndim == 4)


@pytest.fixture(scope="module")
def data():
    full = demo_dataset(n=256)
    return validate(full.X, full.y, "demo").split(0.25, seed=0)


def _trainer(data) -> Trainer:
    seed_everything(0)
    return Trainer(build_model("small_cnn", (1, 28, 28), 10), data[0], data[1], batch_size=32, lr=1e-3, seed=0)


def _losses(trainer: Trainer, schedule: dict[int, Plan], steps: int = 6) -> list[float]:  # 6: one epoch
    out = []
    for step in range(steps):
        if step in schedule:
            trainer.use_plan(schedule[step])
        out.append(trainer.train_step(0, step).loss)
    return out


def test_a_plans_layout_reaches_the_model_its_optimizer_state_and_its_inputs(data):
    trainer = _trainer(data)
    seen: list[torch.Tensor] = []
    # the second convolution: its input has 16 channels (with one, both layouts have the same strides)
    second_conv = [m for m in trainer.full_model.modules() if isinstance(m, torch.nn.Conv2d)][1]
    second_conv.register_forward_pre_hook(lambda _m, args: seen.append(args[0]))
    trainer.use_plan(Plan("cpu", threads=1, memory_format=CHANNELS_LAST))
    trainer.train_step(0, 0)
    trainer.train_step(0, 1)
    assert in_layout(trainer.full_model, CHANNELS_LAST) and not in_layout(trainer.full_model, None)
    assert seen and all(x.is_contiguous(memory_format=CL) and not x.is_contiguous() for x in seen)
    moments = [t for s in trainer.optimizer.state.values() for t in s.values() if isinstance(t, torch.Tensor) and t.ndim == 4]
    assert moments and all(t.is_contiguous(memory_format=CL) for t in moments)
    trainer.evaluate()  # validation batches follow the layout too
    assert seen[-1].is_contiguous(memory_format=CL)

    trainer.use_plan(Plan("cpu", threads=1))  # and back: PyTorch's default layout again
    trainer.train_step(0, 2)
    assert in_layout(trainer.full_model, None) and seen[-1].is_contiguous()
    assert not seen[-1].is_contiguous(memory_format=CL)


def test_a_layout_switch_mid_run_keeps_the_loss_trajectory(data):
    straight = _losses(_trainer(data), {0: Plan("cpu", threads=1)})
    switched = _losses(
        _trainer(data),
        {0: Plan("cpu", threads=1), 2: Plan("cpu", threads=1, memory_format=CHANNELS_LAST), 4: Plan("cpu", threads=1)},
    )
    assert switched[:2] == straight[:2]  # identical until the switch
    # the same math in other strides: oneDNN sums in another order, so equal to float tolerance
    assert switched == pytest.approx(straight, rel=1e-4, abs=1e-5)
    assert len(set(straight)) == len(straight)  # each step saw another batch and other weights


def test_a_split_plan_in_channels_last_takes_the_same_steps(data):
    straight = _losses(_trainer(data), {0: Plan("cpu", threads=1)})
    split = Plan.split([Plan("cpu", threads=1), Plan("cpu", threads=1)]).with_settings(CHANNELS_LAST)
    assert [w.memory_format for w in split.workers] == [CHANNELS_LAST, CHANNELS_LAST]
    trainer = _trainer(data)
    assert _losses(trainer, {0: split}) == pytest.approx(straight, rel=1e-4, abs=1e-5)
    assert in_layout(trainer.full_model, CHANNELS_LAST)


# The trainer runs whatever plan it is given (the agent decides what is native), so these run on any CPU.
def test_a_bf16_plan_trains_under_autocast_and_keeps_fp32_weights(data):
    trainer = _trainer(data)
    dtypes: list[torch.dtype] = []
    first_conv = next(m for m in trainer.full_model.modules() if isinstance(m, torch.nn.Conv2d))
    first_conv.register_forward_hook(lambda _m, _a, out: dtypes.append(out.dtype))
    losses = _losses(trainer, {0: Plan("cpu", threads=1, precision="bf16")})
    assert dtypes and all(d == torch.bfloat16 for d in dtypes)
    assert all(p.dtype == torch.float32 for p in trainer.full_model.parameters())
    fp32 = _losses(_trainer(data), {0: Plan("cpu", threads=1)})
    assert losses == pytest.approx(fp32, rel=2e-2)  # bf16 rounds at ~3 significant digits


@pytest.fixture(scope="module")
def small_demo():
    full = demo_dataset(n=400)
    return validate(full.X, full.y, "demo")


def test_a_run_forced_to_channels_last_runs_in_it_and_says_so(small_demo):
    result, events = run_session(
        SessionConfig(model="small_cnn", epochs=1, batch_size=32, backend="cpu", threads=1, memory_format="channels_last"),
        dataset=small_demo,
    )
    assert result["status"] == "success"
    assert result["plan"]["memory_format"] == "channels_last" and result["plan"]["precision"] is None
    thoughts = [e.text for e in events if isinstance(e, ev.AgentStepped)]
    assert any("the layout is channels_last, as asked" in t for t in thoughts)
    weighed = [e.data["plan"] for e in events if isinstance(e, ev.AgentStepped) and "plan" in (e.data or {})]
    cpu = [p for p in weighed if p["backend"] in ("cpu", "split") and "excluded" not in p]
    assert cpu and all(p.get("memory_format") == "channels_last" for p in cpu)  # no NCHW plan was weighed


def test_contiguous_only_keeps_every_plan_in_pytorchs_layout(small_demo):
    result, events = run_session(
        SessionConfig(model="small_cnn", epochs=1, batch_size=32, memory_format="contiguous"), dataset=small_demo
    )
    assert result["status"] == "success" and result["plan"]["memory_format"] is None
    plans = [e.data["plan"] for e in events if isinstance(e, ev.AgentStepped) and "plan" in (e.data or {})]
    assert plans and all(p.get("memory_format") is None for p in plans)


def test_a_model_without_convolutions_is_never_offered_channels_last(small_demo):
    result, events = run_session(SessionConfig(model="mlp", epochs=1, batch_size=32), dataset=small_demo)
    assert result["status"] == "success"
    plans = [e.data["plan"] for e in events if isinstance(e, ev.AgentStepped) and "plan" in (e.data or {})]
    assert plans and all(p.get("memory_format") is None for p in plans)


def _steer_on_first_step(session, action):
    done = False
    for event in session.events():
        if isinstance(event, ev.StepProgressed) and not done:
            done = True
            action(session)
        yield event


def test_an_override_into_channels_last_converts_at_the_next_step_and_keeps_training(small_demo):
    session = TrainingSession(
        SessionConfig(model="small_cnn", epochs=1, batch_size=16, backend="cpu", threads=1, memory_format="contiguous"),
        dataset=small_demo,
    )
    events = list(
        _steer_on_first_step(session, lambda s: s.override_backend("cpu", threads=1, memory_format="channels_last"))
    )
    chosen = [e for e in events if isinstance(e, ev.BackendChosen)]
    assert chosen[-1].plan == Plan("cpu", threads=1, memory_format=CHANNELS_LAST)
    epoch = [e for e in events if isinstance(e, ev.EpochTimed)][0]
    assert [s["plan"].get("memory_format") for s in epoch.segments] == [None, "channels_last"]
    assert in_layout(session.trainer.full_model, CHANNELS_LAST)
    assert events[-1].status == "success"


def test_a_run_resumes_from_a_checkpoint_written_in_channels_last(small_demo, trainpilot_home):
    config = SessionConfig(model="small_cnn", epochs=1, batch_size=32, backend="cpu", threads=1, memory_format="channels_last")
    first, _ = run_session(config, dataset=small_demo)
    assert first["status"] == "success"
    from dataclasses import replace

    resumed, _ = run_session(replace(config, epochs=2, resume=first["run_id"]), dataset=small_demo)
    assert resumed["status"] == "success" and resumed["plan"]["memory_format"] == "channels_last"
    assert resumed["epochs"][-1]["epoch"] == 2 and resumed["epochs"][-1]["plan"]["memory_format"] == "channels_last"


def test_an_fp16_plan_scales_its_loss_and_its_scale_survives_a_checkpoint(data):
    trainer = _trainer(data)
    losses = _losses(trainer, {0: Plan("cpu", threads=1, precision="fp16")}, steps=3)
    assert trainer._scaler is not None and all(torch.isfinite(torch.tensor(losses)))
    state = trainer.state_dict()
    assert state["grad_scaler_state"]["scale"] > 1.0  # gradients were scaled, not underflowing
    fp32 = _losses(_trainer(data), {0: Plan("cpu", threads=1)}, steps=3)
    assert losses == pytest.approx(fp32, rel=5e-2)  # fp16 rounds at ~3 significant digits

    resumed = _trainer(data)  # a resume loads the checkpoint before the plan is in use
    resumed.load_state_dict(state)
    resumed.use_plan(Plan("cpu", threads=1, precision="fp16"))
    assert resumed._scaler.state_dict()["scale"] == state["grad_scaler_state"]["scale"]


def test_a_split_plan_is_never_given_an_unscaled_fp16_step(data):
    trainer = _trainer(data)
    trainer.use_plan(Plan.split([Plan("cpu", threads=1), Plan("cpu", threads=1)]).with_settings(precision="fp16"))
    assert trainer._scaler is None  # the runner returns unscaled gradients: a scaler would unscale them wrongly


@pytest.mark.parametrize("bf16", [False, True])
def test_asking_for_bf16_is_refused_with_the_reason_where_nothing_runs_it(small_demo, monkeypatch, bf16):
    from trainpilot.machine import precision_support

    flags = {"avx2", "avx512_bf16"} if bf16 else {"avx2"}
    monkeypatch.setattr(precision_support, "cpu_flags", lambda: frozenset(flags))
    result, _ = run_session(SessionConfig(model="mlp", epochs=1, batch_size=32, precision="bf16"), dataset=small_demo)
    if bf16:
        assert result["status"] == "success" and result["plan"]["precision"] == "bf16"
    else:
        assert result["status"] == "failed"
        assert "--precision bf16: nothing here runs it natively (this CPU has no native bf16" in result["message"]


def test_a_users_own_convolutional_job_trains_in_channels_last_through_fit():
    import trainpilot

    torch.manual_seed(0)
    x, y = torch.randn(96, 3, 8, 8), torch.randint(0, 4, (96,))
    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.ReLU(), torch.nn.Flatten(), torch.nn.Linear(8 * 64, 4)
    )
    job = trainpilot.Job(model, (x, y), batch_size=16)
    result = trainpilot.fit(job, epochs=1, backend="cpu", threads=1, memory_format="channels_last", record_history=False)
    assert result.ok and result.plan == Plan("cpu", threads=1, memory_format=CHANNELS_LAST)
    # trained in channels_last, handed back in PyTorch's strides: the user's own code may view() it
    assert in_layout(result.model, None) and result.model[0].weight.view(-1).numel() == 8 * 3 * 9
    report = trainpilot.plan(job, epochs=1, memory_format="contiguous")
    assert report.plans and all(p["memory_format"] is None for p in report.plans)
