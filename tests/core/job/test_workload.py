"""Workloads are real modules, and their profile is measured from them."""
from __future__ import annotations

import textwrap

import pytest
import torch

from trainpilot.errors import WorkloadError
from trainpilot.job.models import ModelSpec, build_model
from trainpilot.job.workload import profile_model


@pytest.mark.parametrize("name", ["small_cnn", "wide_cnn", "large_dense", "rnn", "mlp"])
def test_zoo_models_train_one_step_and_profile(name):
    model = build_model(name, (1, 28, 28), 10)
    out = model(torch.randn(4, 1, 28, 28))
    assert out.shape == (4, 10)
    profile = profile_model(model, (1, 28, 28), 10, 500, name=name)
    assert profile.params == sum(p.numel() for p in model.parameters())
    assert profile.flops_per_sample > profile.forward_flops_per_sample > 0
    assert profile.weight_bytes == profile.params * 4
    assert profile.activation_bytes_per_sample > 0
    assert profile.dataset_size == 500


def test_layers_are_honoured():
    shallow = profile_model(build_model({"name": "large_dense", "layers": 2}, (1, 28, 28), 10), (1, 28, 28), 10, 10)
    deep = profile_model(build_model({"name": "large_dense", "layers": 5}, (1, 28, 28), 10), (1, 28, 28), 10, 10)
    assert (shallow.layers, deep.layers) == (2, 5)
    assert deep.params > shallow.params
    cnn = profile_model(build_model({"name": "small_cnn", "layers": 4}, (1, 28, 28), 10), (1, 28, 28), 10, 10)
    assert cnn.layer_kinds == {"conv": 3, "dense": 1} and cnn.has_conv and not cnn.has_rnn


def test_dense_flops_match_the_matmul_count():
    model = build_model({"name": "mlp", "layers": 2, "width": 100}, (784,), 10)
    profile = profile_model(model, (784,), 10, 10)
    forward = 2 * (784 * 100 + 100 * 10)
    assert profile.forward_flops_per_sample == pytest.approx(forward, rel=0.01)
    # backward: grads of weights for both layers, grad of input only for the second
    assert profile.flops_per_sample == pytest.approx(forward + 2 * 784 * 100 + 2 * 2 * 100 * 10, rel=0.01)


def test_recurrent_flops_are_counted_although_the_counter_misses_lstm():
    profile = profile_model(build_model({"name": "rnn", "layers": 1, "width": 32}, (1, 28, 28), 10), (1, 28, 28), 10, 10)
    lstm_forward = 28 * 2 * 4 * 32 * (28 + 32)
    assert profile.forward_flops_per_sample >= lstm_forward
    assert profile.has_rnn


def test_rnn_reads_tabular_and_sequence_inputs():
    assert build_model("rnn", (12,), 3)(torch.randn(2, 12)).shape == (2, 3)
    assert build_model("rnn", (5, 7), 3)(torch.randn(2, 5, 7)).shape == (2, 3)


def test_unknown_model_and_bad_layers_are_clear_errors():
    with pytest.raises(WorkloadError, match="unknown model 'resnet9000'"):
        ModelSpec.from_config("resnet9000")
    with pytest.raises(WorkloadError, match="'layers' must be an integer"):
        ModelSpec.from_config({"name": "mlp", "layers": 0})
    with pytest.raises(WorkloadError, match="small_cnn needs image-shaped samples"):
        build_model("small_cnn", (7,), 2)


def test_user_model_from_file(tmp_path):
    source = tmp_path / "my_model.py"
    source.write_text(textwrap.dedent("""
        import torch.nn as nn
        class Tiny(nn.Module):
            def __init__(self):
                super().__init__()
                self.net = nn.Sequential(nn.Flatten(), nn.Linear(784, 16), nn.ReLU(), nn.Linear(16, 10))
            def forward(self, x):
                return self.net(x)
        class NeedsArgs(nn.Module):
            def __init__(self, width):
                super().__init__()
        NOT_A_MODULE = 3
    """))
    model = build_model(f"{source}:Tiny", (1, 28, 28), 10)
    profile = profile_model(model, (1, 28, 28), 10, 100, name=f"{source}:Tiny")
    assert profile.params == 784 * 16 + 16 + 16 * 10 + 10
    with pytest.raises(WorkloadError, match="must take no arguments"):
        build_model(f"{source}:NeedsArgs", (1, 28, 28), 10)
    with pytest.raises(WorkloadError, match="defines no 'Missing'"):
        build_model(f"{source}:Missing", (1, 28, 28), 10)
    with pytest.raises(WorkloadError, match="not a torch.nn.Module"):
        build_model(f"{source}:NOT_A_MODULE", (1, 28, 28), 10)
    with pytest.raises(WorkloadError, match="model file not found"):
        build_model(f"{tmp_path}/nope.py:Tiny", (1, 28, 28), 10)


def test_user_model_that_does_not_fit_the_data_is_reported(tmp_path):
    source = tmp_path / "wrong.py"
    source.write_text("import torch.nn as nn\nclass W(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.l = nn.Linear(3, 2)\n    def forward(self, x):\n        return self.l(x)\n")
    model = build_model(f"{source}:W", (1, 28, 28), 10)
    with pytest.raises(WorkloadError, match="forward/backward pass on input"):
        profile_model(model, (1, 28, 28), 10, 10)
