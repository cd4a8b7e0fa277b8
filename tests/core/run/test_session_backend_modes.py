"""The session drives every backend mode through the backend protocol: a job-rewriting mode
(the ANE's frozen backbone) and a mode that trains a whole epoch itself (Core ML's update task).
The Apple runtime is not here, so a test double stands in for the ANE backend; it lives in tests/."""
from __future__ import annotations


import numpy as np
import pytest
import torch

import trainpilot.backends as backends_module
from trainpilot import events as ev
from trainpilot.backends.base import Backend
from trainpilot.job.data import demo_dataset, validate
from trainpilot.plans import Availability, Plan
from trainpilot.run.session import SessionConfig, TrainingSession



class FakeNeuralEngine(Backend):
    """Computes the 'Core ML' parts with PyTorch on the CPU and counts what it was asked to do."""

    name = "ane"
    title = "fake ANE"

    def __init__(self):
        self.adapted = 0
        self.update_epochs = 0

    def availability(self):
        return Availability(True)

    def plans(self, logical_cpus):
        return [Plan("ane", mode="frozen-backbone"), Plan("ane", mode="core-ml-update")]

    def device(self, plan):
        return torch.device("cpu")

    def adapt_job(self, model, inputs, plan):
        self.adapted += 1
        with torch.no_grad():
            feats = model.net[:2](torch.as_tensor(np.asarray(inputs[np.arange(len(inputs))]), dtype=torch.float32).flatten(1)).numpy()
        return model.net[2:], feats

    def trains_whole_epochs(self, plan):
        return plan.mode == "core-ml-update"

    def train_epoch(self, model, train_set, *, batch_size, lr):
        self.update_epochs += 1
        opt = torch.optim.SGD(model.parameters(), lr=0.05)
        x = torch.as_tensor(np.asarray(train_set.X[np.arange(len(train_set.X))]), dtype=torch.float32)
        loss = torch.nn.functional.cross_entropy(model(x), torch.as_tensor(train_set.y))
        loss.backward()
        opt.step()
        return float(loss.detach())


@pytest.fixture
def fake_ane(monkeypatch):
    fake = FakeNeuralEngine()
    real = backends_module.get_backend
    monkeypatch.setattr(backends_module, "get_backend", lambda name: fake if name == "ane" else real(name))
    return fake


@pytest.fixture(scope="module")
def data():
    full = demo_dataset(n=300)
    return validate(full.X, full.y, "demo")


def _run(config, data, steer=None):
    session = TrainingSession(config, dataset=data)
    out = []
    for event in session.events():
        out.append(event)
        if steer and isinstance(event, ev.StepProgressed) and event.step == 1 and event.epoch == 1:
            steer(session)
    return session, out


def test_frozen_backbone_trains_only_the_head(fake_ane, data):
    session, events = _run(SessionConfig(model={"name": "mlp", "layers": 2}, epochs=1, backend="ane"), data)
    assert events[-1].status == "success", events[-1].message
    assert fake_ane.adapted == 1
    assert events[-1].result["plan"]["mode"] == "frozen-backbone"
    first_layer = session.trainer.full_model.net[0]
    assert first_layer.weight.grad is None  # the backbone never saw a gradient


def test_override_from_ane_to_cpu_trains_the_whole_model(fake_ane, data):
    session, events = _run(SessionConfig(model={"name": "mlp", "layers": 2}, epochs=1, backend="ane"), data, steer=lambda s: s.override_backend("cpu", threads=1))
    chosen = [e for e in events if isinstance(e, ev.BackendChosen)]
    assert [c.plan.backend for c in chosen] == ["ane", "cpu"]
    assert session.trainer.full_model.net[0].weight.grad is not None


def test_core_ml_update_mode_trains_whole_epochs(fake_ane, data, monkeypatch):
    monkeypatch.setattr(FakeNeuralEngine, "plans", lambda self, n: [Plan("ane", mode="core-ml-update")])
    session, events = _run(SessionConfig(model="mlp", epochs=2, backend="ane"), data)
    assert events[-1].status == "success", events[-1].message
    assert fake_ane.update_epochs == 2
    epochs = [e for e in events if isinstance(e, ev.EpochTimed)]
    assert len(epochs) == 2 and all(e.plan.mode == "core-ml-update" and e.accuracy is not None for e in epochs)
    assert not any(isinstance(e, ev.StepProgressed) for e in events)
