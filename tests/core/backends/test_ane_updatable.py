"""Updatable Core ML neural networks built from real PyTorch models, checked on Linux.

Core ML cannot run here, so the built spec is evaluated by a small numpy interpreter below (tests
only) for the layer types this mode emits; agreeing with PyTorch proves the weight layouts,
padding, pooling and flatten order are right, which is what MLUpdateTask will start from.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

from trainpilot.backends.ane.updatable import (
    UpdatableModel,
    build_updatable_model,
    check_updatable,
    load_weights,
    spec_weights,
)
from trainpilot.errors import WorkloadError
from trainpilot.job.models import build_model

ct = pytest.importorskip("coremltools")

SHAPE = (1, 12, 12)


# ---------------------------------------------------------------- numpy interpreter (tests only)


def _conv(x: np.ndarray, layer) -> np.ndarray:  # type: ignore[no-untyped-def]
    p = layer.convolution
    out_c, in_c = p.outputChannels, p.kernelChannels
    kh, kw = p.kernelSize
    sh, sw = p.stride
    pads = p.valid.paddingAmounts.borderAmounts
    (pt, pb), (pl, pr) = (pads[0].startEdgeSize, pads[0].endEdgeSize), (pads[1].startEdgeSize, pads[1].endEdgeSize)
    w = np.array(p.weights.floatValue, dtype=np.float64).reshape(out_c, in_c, kh, kw)
    b = np.array(p.bias.floatValue) if p.hasBias else np.zeros(out_c)
    x = np.pad(x, ((0, 0), (pt, pb), (pl, pr)))
    h, wd = (x.shape[1] - kh) // sh + 1, (x.shape[2] - kw) // sw + 1
    out = np.zeros((out_c, h, wd))
    for i in range(h):
        for j in range(wd):
            patch = x[:, i * sh : i * sh + kh, j * sw : j * sw + kw]
            out[:, i, j] = np.tensordot(w, patch, axes=([1, 2, 3], [0, 1, 2])) + b
    return out


def _pool(x: np.ndarray, layer) -> np.ndarray:  # type: ignore[no-untyped-def]
    p = layer.pooling
    kh, kw = p.kernelSize
    sh, sw = p.stride
    h, w = (x.shape[1] - kh) // sh + 1, (x.shape[2] - kw) // sw + 1
    reduce = np.max if p.type == 0 else np.mean  # 0: MAX in PoolingLayerParams.PoolingType
    return np.stack([[[reduce(x[c, i * sh : i * sh + kh, j * sw : j * sw + kw]) for j in range(w)] for i in range(h)]
                     for c in range(x.shape[0])])


def evaluate_spec(path: Path, sample: np.ndarray) -> np.ndarray:
    """Run one sample through the classifier spec and return the softmax probabilities."""
    spec = ct.utils.load_spec(str(path))
    blobs = {spec.description.input[0].name: sample.astype(np.float64)}
    for layer in spec.neuralNetworkClassifier.layers:
        x = blobs[layer.input[0]]
        kind = layer.WhichOneof("layer")
        if kind == "convolution":
            y = _conv(x, layer)
        elif kind == "pooling":
            y = _pool(x, layer)
        elif kind == "activation":
            assert layer.activation.WhichOneof("NonlinearityType") == "ReLU"
            y = np.maximum(x, 0)
        elif kind == "flatten":
            assert layer.flatten.mode == 0  # CHANNEL_FIRST, PyTorch's order
            y = x.reshape(-1)
        elif kind == "innerProduct":
            p = layer.innerProduct
            w = np.array(p.weights.floatValue).reshape(p.outputChannels, p.inputChannels)
            y = w @ x.reshape(-1) + (np.array(p.bias.floatValue) if p.hasBias else 0)
        elif kind == "softmax":
            e = np.exp(x - x.max())
            y = e / e.sum()
        else:
            raise AssertionError(f"unexpected layer {kind}")
        blobs[layer.output[0]] = y
    return blobs["probs"]


# ---------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def cnn(tmp_path_factory: pytest.TempPathFactory) -> tuple[nn.Module, UpdatableModel]:
    torch.manual_seed(0)
    model = build_model("small_cnn", SHAPE, 4)
    built = build_updatable_model(model, SHAPE, 4, tmp_path_factory.mktemp("upd") / "cnn.mlmodel",
                                  epochs=3, batch_size=16, learning_rate=0.05, momentum=0.9)
    return model, built


@pytest.fixture(scope="module")
def mlp(tmp_path_factory: pytest.TempPathFactory) -> tuple[nn.Module, UpdatableModel]:
    torch.manual_seed(1)
    model = build_model("mlp", SHAPE, 3)
    built = build_updatable_model(model, SHAPE, 3, tmp_path_factory.mktemp("upd") / "mlp.mlmodel",
                                  optimizer="adam", learning_rate=0.001, freeze=1)
    return model, built


# ---------------------------------------------------------------- tests


def test_cnn_becomes_an_updatable_classifier(cnn: tuple[nn.Module, UpdatableModel]) -> None:
    _, built = cnn
    assert built.path.is_file() and built.path.suffix == ".mlmodel"
    spec = ct.utils.load_spec(str(built.path))
    assert spec.isUpdatable and spec.WhichOneof("Type") == "neuralNetworkClassifier"
    layers = spec.neuralNetworkClassifier.layers
    updatable = [layer.name for layer in layers if layer.isUpdatable]
    assert updatable == list(built.updatable_layers) == list(built.layers)
    assert {layers[i].WhichOneof("layer") for i, l in enumerate(layers) if l.isUpdatable} == {"convolution", "innerProduct"}
    params = spec.neuralNetworkClassifier.updateParams
    assert params.lossLayers[0].categoricalCrossEntropyLossLayer.input == "probs"
    assert params.optimizer.sgdOptimizer.learningRate.defaultValue == pytest.approx(0.05)
    assert params.optimizer.sgdOptimizer.miniBatchSize.defaultValue == 16
    assert params.optimizer.sgdOptimizer.momentum.defaultValue == pytest.approx(0.9)
    assert params.epochs.defaultValue == 3
    # the training target is the predicted class label, an Int64
    target = [f for f in spec.description.trainingInput if f.name == built.label_name]
    assert target and target[0].type.WhichOneof("Type") == "int64Type"
    assert built.input_shape == SHAPE


def test_cnn_spec_computes_what_pytorch_computes(cnn: tuple[nn.Module, UpdatableModel]) -> None:
    model, built = cnn
    x = torch.randn(3, *SHAPE, generator=torch.Generator().manual_seed(2))
    model.eval()
    with torch.no_grad():
        expected = torch.softmax(model(x), dim=1).numpy()
    got = np.stack([evaluate_spec(built.path, s.numpy()) for s in x])
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-6)


def test_mlp_is_flat_and_freeze_keeps_first_layers_fixed(mlp: tuple[nn.Module, UpdatableModel]) -> None:
    model, built = mlp
    assert built.input_shape == (144,)
    assert list(built.layers) == ["l1_linear", "l3_linear"] and built.updatable_layers == ("l3_linear",)
    spec = ct.utils.load_spec(str(built.path))
    assert spec.neuralNetworkClassifier.updateParams.optimizer.WhichOneof("OptimizerType") == "adamOptimizer"
    x = torch.randn(2, *SHAPE)
    with torch.no_grad():
        expected = torch.softmax(model.eval()(x), dim=1).numpy()
    got = np.stack([evaluate_spec(built.path, s.numpy().reshape(-1)) for s in x])
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-6)


def test_updated_weights_load_back_into_pytorch(cnn: tuple[nn.Module, UpdatableModel]) -> None:
    """What MLUpdateTask returns (per-layer flat arrays) lands in the right PyTorch tensors."""
    model, built = cnn
    fresh = build_model("small_cnn", SHAPE, 4)
    weights = spec_weights(built.path)
    assert set(weights) == set(built.layers)
    assert load_weights(fresh, built, weights) == 6  # 3 layers x (weights, biases)
    for a, b in zip(model.state_dict().values(), fresh.state_dict().values()):
        assert torch.equal(a, b)
    with pytest.raises(ValueError, match="returned"):
        load_weights(fresh, built, {"l8_linear": {"weights": np.zeros(3, dtype=np.float32)}})


class WithNorm(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(144, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Dropout(0.1), nn.Linear(8, 2))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(torch.flatten(x, 1))


@pytest.mark.parametrize(
    ("model", "reason"),
    [
        (build_model("rnn", SHAPE, 3), "not one"),
        (WithNorm(), "BatchNorm1d layers, Dropout layers"),
        (nn.Sequential(nn.Conv2d(1, 4, 3, groups=1, padding="same"), nn.Flatten(), nn.Linear(576, 2)), "padding other than"),
        (nn.Sequential(nn.Flatten(), nn.Linear(144, 4), nn.ReLU()), "end in a dense"),
    ],
)
def test_models_core_ml_cannot_update_are_refused_with_the_reason(model: nn.Module, reason: str) -> None:
    avail = check_updatable(model)
    assert not avail and reason in avail.reason


def test_zoo_conv_and_dense_models_are_accepted() -> None:
    for name in ("small_cnn", "mlp", "large_dense"):
        assert check_updatable(build_model({"name": name, "width": 8}, SHAPE, 3))


def test_freeze_must_leave_an_updatable_layer(tmp_path: Path) -> None:
    with pytest.raises(WorkloadError, match="between 0 and 1"):
        build_updatable_model(build_model("mlp", SHAPE, 3), SHAPE, 3, tmp_path / "m.mlmodel", freeze=2)
