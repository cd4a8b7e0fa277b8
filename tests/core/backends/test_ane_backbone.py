"""Backbone/head splitting for the ANE's frozen-backbone mode, on real zoo models."""
from __future__ import annotations

import pytest
import torch
from torch import nn

from trainpilot.backends.ane.backbone import layer_sequence, output_shape, split_model
from trainpilot.errors import WorkloadError
from trainpilot.job.models import build_model

SHAPE = (1, 12, 12)


def _same(model: nn.Module, backbone: nn.Module, head: nn.Module) -> bool:
    x = torch.randn(5, *SHAPE)
    model.eval()
    with torch.no_grad():
        return torch.allclose(model(x), head(backbone(x)), atol=1e-6)


@pytest.mark.parametrize("freeze", [1, 2])
def test_small_cnn_split_composes_to_the_model(freeze: int) -> None:
    model = build_model("small_cnn", SHAPE, 4)  # 2 conv layers + 1 linear
    split = split_model(model, SHAPE, freeze)
    assert (split.frozen_layers, split.trainable_layers) == (freeze, 3 - freeze)
    assert _same(model, split.backbone, split.head)
    # trailing ReLU/pool/flatten belong to the backbone: the head starts with a learnable layer
    first = next(iter(split.head))
    assert isinstance(first, (nn.Conv2d, nn.Linear))


def test_head_shares_parameters_with_the_model() -> None:
    model = build_model("small_cnn", SHAPE, 4)
    split = split_model(model, SHAPE, 2)
    model_params = {id(p) for p in model.parameters()}
    assert {id(p) for p in split.head.parameters()} <= model_params
    with torch.no_grad():
        next(iter(split.head.parameters())).add_(1.0)  # training the head changes the model
    assert torch.equal(model.classifier.weight, next(iter(split.head.parameters())))


def test_mlp_split_flattens_first() -> None:
    model = build_model("mlp", SHAPE, 3)
    split = split_model(model, SHAPE, 1)
    assert _same(model, split.backbone, split.head)
    assert output_shape(split.backbone, SHAPE) == (128,)


def test_model_with_backbone_and_head_attributes() -> None:
    class Marked(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.backbone = nn.Sequential(nn.Flatten(), nn.Linear(144, 8), nn.ReLU())
            self.head = nn.Linear(8, 3)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.head(self.backbone(x))

    model = Marked()
    split = split_model(model, SHAPE)
    assert split.backbone is model.backbone and split.head is model.head
    assert split.source == "backbone/head attributes"


def test_a_forward_that_is_not_head_of_backbone_is_refused() -> None:
    class Residual(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.backbone = nn.Sequential(nn.Flatten(), nn.Linear(144, 144))
            self.head = nn.Linear(144, 3)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            flat = torch.flatten(x, 1)
            return self.head(self.backbone(x) + flat)  # skip connection around the backbone

    with pytest.raises(WorkloadError, match="not head\\(backbone\\(x\\)\\)"):
        split_model(Residual(), SHAPE)


def test_lstm_has_no_layer_sequence() -> None:
    model = build_model("rnn", SHAPE, 3)
    assert layer_sequence(model) is None
    with pytest.raises(WorkloadError, match="not a sequence"):
        split_model(model, SHAPE, 1)


@pytest.mark.parametrize("freeze", [0, 3, 7])
def test_freeze_must_leave_something_on_both_sides(freeze: int) -> None:
    with pytest.raises(WorkloadError, match="between 1 and 2"):
        split_model(build_model("small_cnn", SHAPE, 4), SHAPE, freeze)


def test_no_freeze_and_no_marked_backbone_says_what_is_needed() -> None:
    with pytest.raises(WorkloadError, match="--freeze N"):
        split_model(build_model("mlp", SHAPE, 3), SHAPE)
