"""Structured pruning removes channels for real: the model still runs, is smaller in parameters,
FLOPs and measured step time, and an export's plan rebuilds it; models it cannot handle are refused."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

from trainpilot.compress.cycles import measure_steps
from trainpilot.compress.layers import describe_layers
from trainpilot.compress.prune import check_prunable, prune, rebuild
from trainpilot.errors import WorkloadError
from trainpilot.job.models import build_model

SHAPE = (1, 28, 28)


def test_pruned_model_runs_and_is_smaller_in_params_flops_and_measured_time() -> None:
    torch.manual_seed(0)
    dense = build_model("wide_cnn", SHAPE, 10)
    layers = check_prunable(dense, SHAPE)
    assert [l.kind for l in layers.prunable] == ["conv", "conv", "conv"] and layers.output_layer == "classifier"
    pruned = prune(dense, layers, {l.name: 0.6 for l in layers.prunable}, SHAPE)
    assert pruned.kept == {"features.0": 12, "features.4": 25, "features.8": 25}  # 60% of 32, 64, 64 removed, rounded up
    assert pruned.model(torch.randn(4, *SHAPE)).shape == (4, 10)
    assert pruned.params < 0.3 * sum(p.numel() for p in dense.parameters())
    assert describe_layers(pruned.model, SHAPE).total_flops < 0.3 * layers.total_flops
    times = measure_steps({"dense": dense, "pruned": pruned.model}, SHAPE, 10, batch=32, threads=1, repeats=5)
    assert times.label == "measured" and times.speedup("pruned") > 1.3
    assert sum(p.numel() for p in dense.parameters()) == layers.total_params  # the original is untouched


def test_conv_dominates_the_wide_cnn() -> None:
    layers = describe_layers(build_model("wide_cnn", SHAPE, 10), SHAPE)
    assert sum(l.flops_share for l in layers.prunable) > 0.99


def test_the_layer_plan_rebuilds_the_pruned_model() -> None:
    torch.manual_seed(1)
    dense = build_model("small_cnn", SHAPE, 10)
    layers = check_prunable(dense, SHAPE)
    pruned = prune(dense, layers, {"features.0": 0.25, "features.3": 0.5}, SHAPE)
    fresh = rebuild(build_model("small_cnn", SHAPE, 10), pruned.plan(), SHAPE)
    fresh.load_state_dict(pruned.model.state_dict())
    x = torch.randn(3, *SHAPE)
    assert torch.allclose(fresh.eval()(x), pruned.model.eval()(x))


def test_global_l1_ranks_channels_across_layers() -> None:
    dense = build_model("wide_cnn", SHAPE, 10)
    layers = check_prunable(dense, SHAPE)
    pruned = prune(dense, layers, {}, SHAPE, global_ratio=0.5)
    total = sum(l.out_channels for l in layers.prunable)
    assert sum(pruned.kept.values()) == pytest.approx(total / 2, abs=3)


def test_lstm_is_refused_with_the_reason() -> None:
    with pytest.raises(WorkloadError, match="recurrent layers \\(LSTM\\).*torch-pruning"):
        check_prunable(build_model("rnn", SHAPE, 10), SHAPE)


def test_a_model_whose_dependencies_torch_pruning_cannot_follow_is_refused(tmp_path: Path) -> None:
    source = tmp_path / "detour.py"
    source.write_text(  # the features go through numpy: the trace loses the conv -> head dependency
        "import torch\nfrom torch import nn\n"
        "class Detour(nn.Module):\n"
        "    def __init__(self):\n        super().__init__()\n        self.conv = nn.Conv2d(1, 8, 3)\n        self.head = nn.Linear(8, 10)\n"
        "    def forward(self, x):\n"
        "        features = self.conv(x).mean((2, 3))\n"
        "        return self.head(torch.from_numpy(features.detach().numpy()))\n"
    )
    model = build_model(f"{source}:Detour", SHAPE, 10)
    with pytest.raises(WorkloadError, match="cannot follow this model's dependencies: it finds no channel of conv"):
        check_prunable(model, SHAPE)


def test_a_model_with_only_an_output_layer_has_nothing_to_prune() -> None:
    with pytest.raises(WorkloadError, match="nothing to prune"):
        check_prunable(torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(784, 10)), SHAPE)
