"""The layer generator's view of a model: one `LayerInfo` per prunable layer, and the embedding the
agent reads (kind, in/out channels, kernel, stride, parameters, FLOPs share, position, the previous
layer's action).

Prunable layers are the convolutions (groups = 1) and linear layers a real forward pass runs before
the output layer; the output layer keeps its width (it is the classes). Order and FLOPs come from
that pass, so a user's model is described as it really runs, not as its modules are declared.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import torch
from torch import nn

MAX_KERNEL = 7.0  # kernel sizes above are rare; the feature saturates at 1
MAX_STRIDE = 4.0
EMBEDDING_SIZE = 11


@dataclass(frozen=True)
class LayerInfo:
    name: str  # qualified module name, e.g. "features.3"
    kind: str  # "conv" | "dense"
    in_channels: int
    out_channels: int
    kernel: int
    stride: int
    params: int
    flops: float  # forward FLOPs per sample
    flops_share: float  # of the whole model's conv + dense forward FLOPs
    position: int  # 0-based, in forward order
    count: int  # prunable layers in the model

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class ModelLayers:
    prunable: tuple[LayerInfo, ...]
    output_layer: str  # the last conv/linear of the forward pass: never pruned
    total_flops: float  # conv + dense forward FLOPs per sample
    total_params: int

    def flops_after(self, position: int) -> float:
        """Share of FLOPs in the prunable layers after `position` (what later actions can still cut)."""
        return sum(layer.flops_share for layer in self.prunable[position + 1 :])


def _flops(module: nn.Module, inp: torch.Tensor, out: torch.Tensor) -> float:
    if isinstance(module, nn.Conv2d):
        kh, kw = module.kernel_size
        return 2.0 * out.numel() * (module.in_channels // module.groups) * kh * kw
    if isinstance(module, nn.Linear):
        return 2.0 * out.numel() * module.in_features
    return 0.0


def describe_layers(model: nn.Module, sample_shape: tuple[int, ...]) -> ModelLayers:
    """Run one sample through `model` and describe each conv / linear layer in the order it ran."""
    names = {id(m): n for n, m in model.named_modules()}
    seen: list[tuple[nn.Conv2d | nn.Linear, float, tuple[int, ...]]] = []

    def hook(module: nn.Module, inputs: Any, out: Any) -> None:
        # registered on convolutions and linear layers alone: the isinstance only tells the type checker
        if (
            isinstance(module, (nn.Conv2d, nn.Linear))
            and isinstance(out, torch.Tensor)
            and all(m is not module for m, _, _ in seen)
        ):
            seen.append((module, _flops(module, inputs[0], out), tuple(out.shape)))

    hooks = [m.register_forward_hook(hook) for m in model.modules() if isinstance(m, (nn.Conv2d, nn.Linear))]
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            model(torch.zeros(1, *sample_shape))
    finally:
        for h in hooks:
            h.remove()
        model.train(was_training)
    if not seen:
        return ModelLayers((), "", 0.0, sum(p.numel() for p in model.parameters()))
    total = sum(f for _, f, _ in seen) or 1.0
    body = [(m, f) for m, f, _ in seen[:-1] if not (isinstance(m, nn.Conv2d) and m.groups != 1)]
    infos = []
    for i, (m, f) in enumerate(body):
        if isinstance(m, nn.Conv2d):
            kind, in_channels, out_channels = "conv", m.in_channels, m.out_channels
            kernel, stride = int(m.kernel_size[0]), int(m.stride[0])
        else:
            kind, in_channels, out_channels, kernel, stride = "dense", m.in_features, m.out_features, 1, 1
        infos.append(
            LayerInfo(
                name=names[id(m)],
                kind=kind,
                in_channels=int(in_channels),
                out_channels=int(out_channels),
                kernel=kernel,
                stride=stride,
                params=sum(p.numel() for p in m.parameters()),
                flops=f,
                flops_share=f / total,
                position=i,
                count=len(body),
            )
        )
    return ModelLayers(tuple(infos), names[id(seen[-1][0])], total, sum(p.numel() for p in model.parameters()))


def embed(layers: ModelLayers, position: int, previous_action: float) -> list[float]:
    """The state of layer `position`, every feature in [0, 1]. `previous_action` is the previous
    layer's sparsity as a fraction of the allowed maximum (0 for the first layer)."""
    layer = layers.prunable[position]
    widest = max(max(info.in_channels, info.out_channels) for info in layers.prunable)
    params = sum(info.params for info in layers.prunable) or 1
    last = max(layer.count - 1, 1)
    return [
        1.0 if layer.kind == "conv" else 0.0,
        1.0 if layer.kind == "dense" else 0.0,
        layer.in_channels / widest,
        layer.out_channels / widest,
        min(layer.kernel / MAX_KERNEL, 1.0),
        min(layer.stride / MAX_STRIDE, 1.0),
        layer.params / params,
        layer.flops_share,
        position / last,
        min(max(previous_action, 0.0), 1.0),
        min(layers.flops_after(position), 1.0),
    ]
