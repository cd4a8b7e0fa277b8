"""core-ml-update mode: an *updatable* Core ML neural network built from a PyTorch model's weights.

Core ML's on-device update (MLUpdateTask) trains only `convolution` and `innerProduct` layers, of
a neural-network (not ML-program) model with FP32 weights, with categorical cross-entropy fed by a
plain softmax. So this mode accepts models made only of Conv2d / Linear layers joined by ReLU,
max/average pooling (no padding) and flatten, and refuses anything else with the reason.

Which device runs the update is Core ML's choice and Apple does not document it; nothing here
claims the ANE. The built file is a real `.mlmodel` (tested on Linux); training it needs macOS
(`runtime.run_update`), and the updated weights come back into the PyTorch model (`load_weights`)
so the session can validate, checkpoint and export it like any other run.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from torch import nn

from trainpilot.backends.ane.backbone import Reshape, layer_sequence
from trainpilot.backends.ane.coreml_import import load_coremltools, quiet_coremltools
from trainpilot.errors import WorkloadError
from trainpilot.plans import Availability

INPUT_NAME = "x"
PROBS_NAME = "probs"  # softmax output: what the loss reads
LABEL_NAME = "label"  # predicted class; also the training target's name (Int64)


@dataclass(frozen=True)
class UpdatableModel:
    path: Path  # the .mlmodel file
    input_name: str
    label_name: str
    input_shape: tuple[int, ...]  # one sample as Core ML sees it: (C, H, W) or (D,)
    num_classes: int
    layers: dict[str, int] = field(default_factory=dict)  # Core ML layer name -> index in layer_sequence(model)
    updatable_layers: tuple[str, ...] = ()
    epochs: int = 1
    batch_size: int = 32


def _pair(value: int | tuple[int, ...]) -> tuple[int, int]:
    return (value, value) if isinstance(value, int) else (int(value[0]), int(value[1]))


def _describe(step: nn.Module) -> str:
    return type(step).__name__


def _unsupported(step: nn.Module) -> str | None:
    """Why Core ML's updatable neural network cannot express this step (None: it can)."""
    if isinstance(step, nn.Conv2d):
        if step.groups != 1:
            return "grouped convolution"
        if step.padding_mode != "zeros" or isinstance(step.padding, str):
            return "convolution padding other than explicit zeros"
        return None
    if isinstance(step, (nn.MaxPool2d, nn.AvgPool2d)):
        if _pair(step.padding) != (0, 0) or step.ceil_mode:
            return "pooling with padding or ceil_mode"
        if isinstance(step, nn.MaxPool2d) and _pair(step.dilation) != (1, 1):
            return "dilated pooling"
        return None
    if isinstance(step, (nn.Linear, nn.ReLU, nn.Flatten, Reshape)):
        return None
    return f"{_describe(step)} layers"


def plan_steps(model: nn.Module) -> list[nn.Module]:
    """The model's layer sequence, or WorkloadError saying why core-ml-update cannot train it."""
    steps = layer_sequence(model)
    if steps is None:
        raise WorkloadError(f"core-ml-update needs a sequence of conv/dense layers; {type(model).__name__} is not one")
    problems = sorted({reason for step in steps if (reason := _unsupported(step))})
    if problems:
        raise WorkloadError(
            "core-ml-update trains only conv/dense layers with ReLU/pool/flatten; this model has " + ", ".join(problems)
        )
    if not any(isinstance(s, (nn.Conv2d, nn.Linear)) for s in steps):
        raise WorkloadError("core-ml-update found no conv or dense layer to train")
    if not isinstance(steps[-1], nn.Linear):
        raise WorkloadError("core-ml-update needs the model to end in a dense (Linear) layer producing the logits")
    return steps


def check_updatable(model: nn.Module) -> Availability:
    try:
        plan_steps(model)
    except WorkloadError as exc:
        return Availability(False, exc.problem)
    return Availability(True)


def _input_shape(steps: list[nn.Module], sample_shape: tuple[int, ...]) -> tuple[int, ...]:
    """Core ML's view of one sample: (C, H, W) when the first real layer is a convolution, else flat."""
    shape = tuple(sample_shape)
    for step in steps:
        if isinstance(step, Reshape):
            shape = step.shape
            continue
        if isinstance(step, nn.Conv2d):
            if len(shape) == 2:
                shape = (1, *shape)
            if len(shape) != 3:
                raise WorkloadError(f"core-ml-update: a convolution needs (C, H, W) samples, got {sample_shape}")
            return shape
        break
    return (int(np.prod(shape)),)


def build_updatable_model(
    model: nn.Module,
    sample_shape: tuple[int, ...],
    num_classes: int,
    path: Path | str,
    *,
    epochs: int = 1,
    batch_size: int = 32,
    learning_rate: float = 0.01,
    optimizer: str = "sgd",
    momentum: float = 0.0,
    freeze: int = 0,
) -> UpdatableModel:
    """Write an updatable classifier `.mlmodel` with the model's current weights.

    The first `freeze` conv/dense layers are left non-updatable (fine-tuning); the rest train.
    """
    ct = load_coremltools()
    from coremltools.models import datatypes  # noqa: PLC0415 - lazily, with coremltools
    from coremltools.models.neural_network import AdamParams, NeuralNetworkBuilder, SgdParams  # noqa: PLC0415

    if optimizer not in ("sgd", "adam"):
        raise ValueError(f"optimizer must be 'sgd' or 'adam', got {optimizer!r}")
    steps = plan_steps(model)
    path = Path(path)
    in_shape = _input_shape(steps, tuple(int(d) for d in sample_shape))
    builder = NeuralNetworkBuilder(
        input_features=[(INPUT_NAME, datatypes.Array(*in_shape))],
        output_features=[(PROBS_NAME, datatypes.Array(num_classes))],
        mode="classifier",
        use_float_arraytype=True,  # float32 inputs, so numpy float32 batches pass unconverted
    )
    shape = in_shape
    blob = INPUT_NAME
    layers: dict[str, int] = {}
    learnable: list[str] = []
    for index, step in enumerate(steps):
        name = f"l{index}_{type(step).__name__.lower()}"
        out = name
        if isinstance(step, Reshape):
            continue  # inputs are fed already shaped as (C, H, W)
        if isinstance(step, nn.Flatten):
            if len(shape) == 1:
                continue
            builder.add_flatten(name, mode=0, input_name=blob, output_name=out)  # 0: channel-first, as torch
            shape = (int(np.prod(shape)),)
        elif isinstance(step, nn.Linear):
            if len(shape) != 1:
                builder.add_flatten(name + "_flatten", mode=0, input_name=blob, output_name=name + "_flat")
                blob, shape = name + "_flat", (int(np.prod(shape)),)
            if shape[0] != step.in_features:
                raise WorkloadError(f"core-ml-update: layer {index} expects {step.in_features} inputs, gets {shape[0]}")
            weight = step.weight.detach().cpu().numpy().astype(np.float32)
            bias: np.ndarray | None = (
                step.bias.detach().cpu().numpy().astype(np.float32) if step.bias is not None else None
            )
            builder.add_inner_product(
                name,
                W=weight,
                b=bias,
                input_channels=step.in_features,
                output_channels=step.out_features,
                has_bias=bias is not None,
                input_name=blob,
                output_name=out,
            )
            shape = (step.out_features,)
            layers[name] = index
            learnable.append(name)
        elif isinstance(step, nn.Conv2d):
            assert not isinstance(step.padding, str)  # plan_steps refused "same"/"valid" (_unsupported)
            (kh, kw), (sh, sw), (ph, pw), (dh, dw) = (
                _pair(step.kernel_size),
                _pair(step.stride),
                _pair(step.padding),
                _pair(step.dilation),
            )
            # torch stores (out, in, kh, kw); the builder takes (kh, kw, in, out) and stores torch's order
            weight = step.weight.detach().cpu().numpy().astype(np.float32).transpose(2, 3, 1, 0)
            bias = step.bias.detach().cpu().numpy().astype(np.float32) if step.bias is not None else None
            builder.add_convolution(
                name,
                kernel_channels=step.in_channels,
                output_channels=step.out_channels,
                height=kh,
                width=kw,
                stride_height=sh,
                stride_width=sw,
                border_mode="valid",
                groups=1,
                W=weight,
                b=bias,
                has_bias=bias is not None,
                input_name=blob,
                output_name=out,
                dilation_factors=[dh, dw],
                padding_top=ph,
                padding_bottom=ph,
                padding_left=pw,
                padding_right=pw,
            )
            h = (shape[1] + 2 * ph - dh * (kh - 1) - 1) // sh + 1
            w = (shape[2] + 2 * pw - dw * (kw - 1) - 1) // sw + 1
            shape = (step.out_channels, h, w)
            layers[name] = index
            learnable.append(name)
        elif isinstance(step, nn.ReLU):
            builder.add_activation(name, "RELU", input_name=blob, output_name=out)
        elif isinstance(step, (nn.MaxPool2d, nn.AvgPool2d)):
            (kh, kw) = _pair(step.kernel_size)
            (sh, sw) = _pair(step.stride if step.stride is not None else step.kernel_size)
            builder.add_pooling(
                name,
                height=kh,
                width=kw,
                stride_height=sh,
                stride_width=sw,
                layer_type="MAX" if isinstance(step, nn.MaxPool2d) else "AVERAGE",
                padding_type="VALID",
                input_name=blob,
                output_name=out,
            )
            shape = (shape[0], (shape[1] - kh) // sh + 1, (shape[2] - kw) // sw + 1)
        blob = out
    if shape != (num_classes,):
        raise WorkloadError(f"core-ml-update: the model outputs {shape}, expected ({num_classes},) logits")
    if not 0 <= freeze < len(learnable):
        raise WorkloadError(f"--freeze must be between 0 and {len(learnable) - 1} for core-ml-update, got {freeze}")
    updatable = learnable[freeze:]
    builder.add_softmax("softmax", input_name=blob, output_name=PROBS_NAME)
    with quiet_coremltools():  # make_updatable / the loss setter print to stdout
        builder.set_class_labels(
            list(range(num_classes)), predicted_feature_name=LABEL_NAME, prediction_blob=PROBS_NAME
        )
        builder.make_updatable(updatable)
        builder.set_categorical_cross_entropy_loss(name="loss", input=PROBS_NAME)
        if optimizer == "sgd":
            builder.set_sgd_optimizer(SgdParams(lr=learning_rate, batch=batch_size, momentum=momentum))
        else:
            builder.set_adam_optimizer(AdamParams(lr=learning_rate, batch=batch_size))
        builder.set_epochs(epochs)
        path.parent.mkdir(parents=True, exist_ok=True)
        ct.models.utils.save_spec(builder.spec, str(path))
    return UpdatableModel(
        path=path,
        input_name=INPUT_NAME,
        label_name=LABEL_NAME,
        input_shape=in_shape,
        num_classes=num_classes,
        layers=layers,
        updatable_layers=tuple(updatable),
        epochs=epochs,
        batch_size=batch_size,
    )


def spec_weights(path: Path | str) -> dict[str, dict[str, np.ndarray]]:
    """Weights and biases of every conv / dense layer stored in an `.mlmodel`, flat, in the spec's
    storage order (conv: out, in, kh, kw; dense: out, in — the same order as PyTorch)."""
    ct = load_coremltools()
    spec = ct.utils.load_spec(str(path))
    nn_spec = spec.neuralNetworkClassifier if spec.HasField("neuralNetworkClassifier") else spec.neuralNetwork
    out: dict[str, dict[str, np.ndarray]] = {}
    for layer in nn_spec.layers:
        kind = layer.WhichOneof("layer")
        if kind in ("convolution", "innerProduct"):
            params = getattr(layer, kind)
            entry = {"weights": np.array(params.weights.floatValue, dtype=np.float32)}
            if params.hasBias:
                entry["biases"] = np.array(params.bias.floatValue, dtype=np.float32)
            out[layer.name] = entry
    return out


def load_weights(model: nn.Module, built: UpdatableModel, weights: dict[str, dict[str, np.ndarray]]) -> int:
    """Copy Core ML's (updated) weights back into the PyTorch model; returns the tensors copied.

    Arrays are reshaped by element count: Core ML returns them in its storage order, which for
    convolution and inner-product layers is PyTorch's order (see `spec_weights`).
    """
    import torch  # noqa: PLC0415

    steps = plan_steps(model)
    copied = 0
    for name, entry in weights.items():
        if name not in built.layers:
            continue
        step = steps[built.layers[name]]
        for key, param in (("weights", step.weight), ("biases", step.bias)):
            if key not in entry or not isinstance(param, torch.Tensor):  # no bias: None
                continue
            array = np.asarray(entry[key], dtype=np.float32).reshape(-1)
            if array.size != param.numel():
                raise ValueError(f"layer {name}: Core ML returned {array.size} {key}, the model has {param.numel()}")
            with torch.no_grad():
                param.copy_(torch.from_numpy(array.reshape(param.shape)))
            copied += 1
    return copied
