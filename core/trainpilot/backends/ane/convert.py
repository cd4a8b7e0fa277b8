"""PyTorch module -> Core ML ML-program package (.mlpackage), runnable on the Neural Engine.

Choices that matter for the ANE:
- a *fixed* batch shape: the ANE runs static (or enumerated) shapes; a RangeDim batch tends to
  send the model to the CPU/GPU. Feature caching pads the last batch instead (see `features`).
- FP16 compute precision (the coremltools default for ML programs): the ANE computes in FP16.
  Inputs and outputs stay float32 so numpy arrays pass through unchanged.
- compute_units=CPU_AND_NE: Core ML may use the ANE or the CPU and picks per operation itself.

Runs on Linux: conversion and saving need no Core ML runtime; only loading for prediction does.
"""

from __future__ import annotations

import time
import warnings
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
from torch import nn

from trainpilot.backends.ane.coreml_import import load_coremltools, quiet_coremltools
from trainpilot.errors import WorkloadError

INPUT_NAME = "x"
OUTPUT_NAME = "y"
# macOS 13 is the oldest target whose ML programs take float32 I/O with FP16 compute on the ANE.
DEPLOYMENT_TARGET = "macOS13"


@dataclass(frozen=True)
class ConvertedModel:
    path: Path  # the .mlpackage directory
    input_name: str
    output_name: str
    batch_size: int  # the fixed batch dimension the package was converted with
    sample_shape: tuple[int, ...]
    output_shape: tuple[int, ...]  # one sample's output
    seconds: float  # trace + convert + save
    op_counts: dict[str, int] = field(default_factory=dict)  # ML-program ops by type, e.g. {"conv": 2}


def convert_module(
    module: nn.Module,
    sample_shape: tuple[int, ...],
    path: Path | str,
    *,
    batch_size: int = 64,
    input_name: str = INPUT_NAME,
    output_name: str = OUTPUT_NAME,
) -> ConvertedModel:
    """Trace `module` on a (batch_size, *sample_shape) input and save it as an ML program package."""
    ct = load_coremltools()
    path = Path(path)
    if path.suffix != ".mlpackage":
        raise ValueError(f"an ML program is saved as a .mlpackage directory, got {path.name}")
    sample_shape = tuple(int(d) for d in sample_shape)
    start = time.perf_counter()
    was_training = module.training
    module.eval()
    try:
        example = torch.zeros(batch_size, *sample_shape)
        with torch.no_grad():
            out_shape = tuple(int(d) for d in module(example).shape[1:])
        mlmodel = None
        failures: list[str] = []
        for capture in (_trace, _export):
            graph = capture(module, example)
            if graph is None:
                continue
            try:
                with quiet_coremltools():
                    mlmodel = ct.convert(
                        graph,
                        inputs=[ct.TensorType(name=input_name, shape=example.shape, dtype=np.float32)],
                        outputs=[ct.TensorType(name=output_name, dtype=np.float32)],
                        convert_to="mlprogram",
                        compute_units=ct.ComputeUnit.CPU_AND_NE,
                        minimum_deployment_target=getattr(ct.target, DEPLOYMENT_TARGET),
                    )
                break
            except Exception as exc:  # try the other frontend before giving up
                failures.append(f"{capture.__name__.strip('_')}: {type(exc).__name__}: {exc}")
        if mlmodel is None:
            raise WorkloadError("Core ML conversion failed (" + "; ".join(failures) + ")")
        path.parent.mkdir(parents=True, exist_ok=True)
        with quiet_coremltools():
            mlmodel.save(str(path))
    except WorkloadError:
        raise
    except Exception as exc:  # e.g. the module cannot run on the example: the workload's limit
        raise WorkloadError(f"Core ML conversion failed: {type(exc).__name__}: {exc}") from exc
    finally:
        module.train(was_training)
    return ConvertedModel(
        path=path,
        input_name=input_name,
        output_name=output_name,
        batch_size=batch_size,
        sample_shape=sample_shape,
        output_shape=out_shape,
        seconds=time.perf_counter() - start,
        op_counts=_op_counts(mlmodel),
    )


# Two ways to hand a module to coremltools. TorchScript tracing goes first: for these small
# models it is faster than torch.export (docs/measurements.md#cited-in-the-code-core-ml) and it is
# coremltools' most-tested frontend. But torch 2.13 deprecates it, and coremltools 9 + numpy 2.4
# fail on a traced `x.reshape(x.shape[0], ...)` (the zoo's SmallCNN does that), so torch.export is
# the fallback for both cases.


def _trace(module: nn.Module, example: torch.Tensor) -> object | None:
    trace = getattr(torch.jit, "trace", None)
    if trace is None:
        return None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        warnings.simplefilter("ignore", torch.jit.TracerWarning)
        with torch.no_grad():
            return trace(module, example, check_trace=False)


def _export(module: nn.Module, example: torch.Tensor) -> object:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        return torch.export.export(module, (example,)).run_decompositions({})


def _op_counts(mlmodel: object) -> dict[str, int]:
    """Operation types in the converted program, for descriptions and tests (constants left out)."""
    program = getattr(mlmodel, "_mil_program", None)
    if program is None:
        return {}
    counts: Counter[str] = Counter()
    for function in program.functions.values():
        for op in function.operations:
            if op.op_type != "const":
                counts[op.op_type] += 1
    return dict(counts)


def export_mlpackage(model: nn.Module, sample_shape: tuple[int, ...], path: Path | str) -> ConvertedModel:
    """The trained model as a deployable package (batch of one), named for what it is."""
    return convert_module(model, sample_shape, path, batch_size=1, input_name="input", output_name="logits")
