"""Structured pruning that really removes channels: torch-pruning builds the model's dependency
graph from a traced forward pass, so removing a conv's output channels also removes the matching
BatchNorm entries and the next layer's input channels (and a linear head's inputs behind a
flatten). The pruned model is a smaller dense model: every backend runs it faster, no sparse
kernel needed.

Why torch-pruning: it follows dependencies through residuals, concatenations and reshapes that a
hand-written channel surgery gets wrong, and it is maintained (VainF/Torch-Pruning, 1.6).

Models it cannot handle are refused with the reason: recurrent layers (torch-pruning 1.6 supports
single-layer LSTMs only, and fails on the zoo's), models whose forward pass it cannot trace, and
models with nothing to prune.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field, replace
from typing import Any

import torch
from torch import nn

from trainpilot.compress.layers import ModelLayers, describe_layers
from trainpilot.errors import WorkloadError

RECURRENT = (nn.LSTM, nn.GRU, nn.RNN)
MAX_SPARSITY = 0.9  # of a layer's channels; a layer always keeps some (and at least one)
TRIAL_SPARSITY = 0.5  # check_prunable's trial cut


@dataclass(frozen=True)
class PrunedModel:
    model: nn.Module
    sparsity: dict[str, float]  # asked, per prunable layer name
    kept: dict[str, int]  # output channels each prunable layer keeps
    removed: dict[str, list[int]] = field(default_factory=dict)  # output channel indices removed, per layer

    @property
    def params(self) -> int:
        return sum(p.numel() for p in self.model.parameters())

    def plan(self) -> dict[str, Any]:
        """What deploy exports beside the weights: enough to rebuild the pruned shapes (`rebuild`)."""
        return {
            name: {
                "sparsity": round(self.sparsity.get(name, 0.0), 4),
                "kept_channels": self.kept[name],
                "removed_channels": self.removed.get(name, []),
            }
            for name in self.kept
        }


def check_prunable(model: nn.Module, sample_shape: tuple[int, ...]) -> ModelLayers:
    """The model's prunable layers, or a WorkloadError saying why it cannot be compressed."""
    recurrent = [type(m).__name__ for m in model.modules() if isinstance(m, RECURRENT)]
    if recurrent:
        raise WorkloadError(
            f"cannot compress a model with recurrent layers ({recurrent[0]}): torch-pruning 1.6 removes LSTM hidden"
            " units only for single-layer LSTMs and fails on this model's; compress a conv or dense model"
        )
    try:
        layers = describe_layers(model, sample_shape)
        was = model.training
        with torch.no_grad():
            out = model.eval()(torch.zeros(2, *sample_shape))
        model.train(was)
        if not isinstance(out, torch.Tensor) or out.ndim != 2:
            raise WorkloadError(f"the model must map a batch to logits (N, classes); it returned {type(out).__name__}")
        _graph(model, sample_shape)
    except WorkloadError:
        raise
    except Exception as exc:  # noqa: BLE001 - a user's model: report, don't crash
        raise WorkloadError(
            f"torch-pruning cannot trace this model ({type(exc).__name__}: {_first_line(exc)})"
        ) from exc
    if not layers.prunable:
        raise WorkloadError("nothing to prune: the model has no convolution or linear layer before its output layer")
    try:  # a dependency the trace did not see (a tensor through numpy, say) breaks the pruned model
        trial = prune(model, layers, {info.name: TRIAL_SPARSITY for info in layers.prunable}, sample_shape)
    except WorkloadError as exc:
        raise WorkloadError(
            f"torch-pruning cannot follow this model's dependencies: after removing channels, {exc.problem}"
        ) from exc
    # torch-pruning leaves a layer alone when its trace does not reach the output through it
    movable = [info for info in layers.prunable if trial.kept[info.name] < info.out_channels]
    if not movable:
        names = ", ".join(info.name for info in layers.prunable)
        raise WorkloadError(
            f"torch-pruning cannot follow this model's dependencies: it finds no channel of {names}"
            " it can remove safely (its trace does not reach the output through them)"
        )
    return replace(
        layers, prunable=tuple(replace(info, position=i, count=len(movable)) for i, info in enumerate(movable))
    )


def _graph(model: nn.Module, sample_shape: tuple[int, ...]) -> Any:
    import torch_pruning as tp

    was = model.training
    model.eval()  # tracing runs a forward pass: it must not move BatchNorm statistics
    try:
        return tp.DependencyGraph().build_dependency(model, example_inputs=torch.zeros(1, *sample_shape))
    finally:
        model.train(was)


def _importance(kind: str) -> Any:
    import torch_pruning as tp

    if kind == "l1":
        return tp.importance.MagnitudeImportance(p=1)
    raise ValueError(f"unknown importance '{kind}'")


def _out_fn(module: nn.Module) -> Any:
    import torch_pruning as tp

    return tp.prune_conv_out_channels if isinstance(module, nn.Conv2d) else tp.prune_linear_out_channels


def prune(
    model: nn.Module,
    layers: ModelLayers,
    sparsity: dict[str, float],
    sample_shape: tuple[int, ...],
    *,
    global_ratio: float | None = None,
    round_to: int | None = None,
) -> PrunedModel:
    """A pruned copy of `model` (the original is untouched). Per layer: `sparsity[name]` of its output
    channels go, the ones with the smallest L1 norm (over the whole dependency group). With
    `global_ratio`, one ranking across all layers removes that share instead (the L1 baseline)."""
    import torch_pruning as tp

    pruned = copy.deepcopy(model)
    modules = dict(pruned.named_modules())
    names = {id(modules[info.name]): info.name for info in layers.prunable}
    ratios = {modules[name]: min(max(float(r), 0.0), MAX_SPARSITY) for name, r in sparsity.items() if r > 0}
    removed: dict[str, list[int]] = {}
    if ratios or global_ratio:
        was_training = pruned.training
        pruned.eval()  # tracing runs a forward pass: it must not move BatchNorm statistics
        pruner = tp.pruner.MetaPruner(
            pruned,
            torch.zeros(1, *sample_shape),
            importance=_importance("l1"),
            global_pruning=global_ratio is not None,
            pruning_ratio=float(global_ratio or 0.0),
            pruning_ratio_dict=None if global_ratio is not None else ratios,
            max_pruning_ratio=MAX_SPARSITY,
            ignored_layers=[modules[layers.output_layer]]
            + [m for m in modules.values() if isinstance(m, nn.Conv2d) and m.groups != 1],
            round_to=round_to,
        )
        for group in pruner.step(interactive=True):
            root = group[0].dep.target.module
            if id(root) in names:
                removed[names[id(root)]] = sorted(int(i) for i in group[0].idxs)
            group.prune()
        pruned.train(was_training)
    kept = {info.name: _out_channels(modules[info.name]) for info in layers.prunable}
    done = {info.name: 1.0 - kept[info.name] / info.out_channels for info in layers.prunable}
    _check_runs(pruned, sample_shape, model)
    return PrunedModel(pruned, done, kept, removed)


def rebuild(model: nn.Module, plan: dict[str, Any], sample_shape: tuple[int, ...]) -> nn.Module:
    """Remove from a freshly built dense `model` the channels `plan` (PrunedModel.plan()) lists, so a
    pruned state_dict loads into it."""
    graph = _graph(model, sample_shape)
    for name, entry in plan.items():
        idxs = [int(i) for i in entry.get("removed_channels", [])]
        if idxs:
            module = model.get_submodule(name)
            graph.get_pruning_group(module, _out_fn(module), idxs=idxs).prune()
    return model


def _out_channels(module: nn.Module) -> int:
    if isinstance(module, nn.Conv2d):
        return int(module.out_channels)
    assert isinstance(module, nn.Linear)  # a prunable layer is a convolution or a linear one (describe_layers)
    return int(module.out_features)


def _check_runs(pruned: nn.Module, sample_shape: tuple[int, ...], original: nn.Module) -> None:
    was = pruned.training
    pruned.eval()
    original_was = original.training
    original.eval()
    try:
        with torch.no_grad():
            x = torch.zeros(2, *sample_shape)
            got, want = pruned(x), original(x)
    except Exception as exc:  # noqa: BLE001 - whatever the broken model raises
        raise WorkloadError(f"the pruned model no longer runs ({type(exc).__name__}: {_first_line(exc)})") from exc
    finally:
        pruned.train(was)
        original.train(original_was)
    if not isinstance(got, torch.Tensor) or got.shape != want.shape:
        raise WorkloadError(f"the pruned model's output changed shape ({tuple(want.shape)} -> {tuple(got.shape)})")


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [""])[0][:160]
