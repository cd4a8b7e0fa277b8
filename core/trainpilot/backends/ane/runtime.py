"""The one adapter that touches the Core ML runtime (macOS only).

Three calls need a Mac: running a converted model (`MLModel.predict`, through coremltools),
training an updatable model (`MLUpdateTask`, through pyobjc-framework-CoreML), and reading the
per-operation placement (`MLComputePlan`, coremltools >= 8.1 on macOS 14.4+). Everything they
consume and produce is built and checked elsewhere on any OS; this module is kept small so that
what cannot be tested on Linux is only the calls themselves (tests/core/test_ane_runtime.py runs
them on macOS).
"""

from __future__ import annotations

import importlib.util
import platform
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from trainpilot.backends.ane.coreml_import import has_native_runtime, load_coremltools, quiet_coremltools
from trainpilot.backends.ane.placement import OpPlacement, device_name
from trainpilot.errors import BackendUnavailable
from trainpilot.plans import Availability

PredictFn = Callable[[np.ndarray], np.ndarray]
EpochFn = Callable[[int, float], None]  # (epoch index from 0, loss)

# MLMultiArrayDataType values (CoreML/MLMultiArray.h): 0x10000 | bits for floats, 0x20000 | bits for ints
_NUMPY_DTYPE = {0x10000 | 16: np.float16, 0x10000 | 32: np.float32, 0x10000 | 64: np.float64, 0x20000 | 32: np.int32}


def mac_version() -> tuple[int, ...]:
    text = platform.mac_ver()[0]
    return tuple(int(p) for p in text.split(".") if p.isdigit()) if text else ()


@dataclass(frozen=True)
class UpdateResult:
    weights: dict[str, dict[str, np.ndarray]]  # Core ML layer name -> {"weights", "biases"}
    epoch_losses: list[float] = field(default_factory=list)
    seconds: float = 0.0
    compiled_model: Path | None = None  # the updated model, written by Core ML (.mlmodelc)


class CoreMLRuntime:
    """Core ML on this Mac. Every method except the availability checks needs macOS."""

    def availability(self) -> Availability:
        if platform.system() != "Darwin":
            return Availability(False, "the Core ML runtime needs macOS")
        if not has_native_runtime():
            return Availability(False, "this coremltools build has no Core ML runtime (libcoremlpython missing)")
        return Availability(True)

    def update_availability(self) -> Availability:
        base = self.availability()
        if not base:
            return base
        if importlib.util.find_spec("CoreML") is None:
            return Availability(False, "pyobjc-framework-CoreML is not installed (pip install pyobjc-framework-CoreML)")
        return Availability(True)

    def placement_availability(self) -> Availability:
        base = self.availability()
        if not base:
            return base
        if mac_version() < (14, 4):
            return Availability(False, "MLComputePlan needs macOS 14.4 or later")
        return Availability(True)

    def _require(self, avail: Availability) -> None:
        if not avail:
            raise BackendUnavailable(avail.reason)

    # ------------------------------------------------------------------ inference

    def predictor(self, package: Path, input_name: str, output_name: str) -> PredictFn:
        """A function running the .mlpackage on CPU_AND_NE: Core ML picks ANE or CPU per operation."""
        self._require(self.availability())
        ct = load_coremltools()
        with quiet_coremltools():
            model = ct.models.MLModel(str(package), compute_units=ct.ComputeUnit.CPU_AND_NE)

        def predict(batch: np.ndarray) -> np.ndarray:
            return np.asarray(model.predict({input_name: batch})[output_name])

        return predict

    # ------------------------------------------------------------------ placement

    def compute_plan(self, package: Path) -> list[OpPlacement]:
        """The device Core ML prefers for each operation of the ML program, with its cost share."""
        self._require(self.placement_availability())
        ct = load_coremltools()
        from coremltools.models.compute_plan import MLComputePlan  # noqa: PLC0415 - macOS-only proxy

        with quiet_coremltools():
            model = ct.models.MLModel(str(package), compute_units=ct.ComputeUnit.CPU_AND_NE)
            plan = MLComputePlan.load_from_path(
                model.get_compiled_model_path(), compute_units=ct.ComputeUnit.CPU_AND_NE
            )
        program = plan.model_structure.program
        if program is None:
            raise BackendUnavailable(f"{package.name} is not an ML program; MLComputePlan placement needs one")
        entries: list[OpPlacement] = []

        def walk(block: Any) -> None:
            for op in block.operations:
                usage = plan.get_compute_device_usage_for_mlprogram_operation(op)
                cost = plan.get_estimated_cost_for_mlprogram_operation(op)
                entries.append(
                    OpPlacement(
                        op.operator_name,
                        device_name(usage.preferred_compute_device if usage else None),
                        cost.weight if cost is not None else None,
                    )
                )
                for inner in op.blocks:
                    walk(inner)

        for function in program.functions.values():
            walk(function.block)
        return entries

    # ------------------------------------------------------------------ on-device update

    def run_update(
        self,
        model_path: Path,
        layer_names: list[str],
        input_name: str,
        label_name: str,
        inputs: np.ndarray,
        labels: np.ndarray,
        *,
        on_epoch: EpochFn | None = None,
        out_dir: Path | None = None,
        timeout_s: float | None = None,
    ) -> UpdateResult:
        """Train the updatable .mlmodel with MLUpdateTask; return the updated weights per layer.

        `inputs` is (N, *input_shape) float32 as the model's input declares; `labels` are class
        indices. The device is Core ML's choice (MLComputeUnitsAll); Apple does not say which.
        """
        self._require(self.update_availability())
        import CoreML  # noqa: PLC0415 - pyobjc, macOS only
        from Foundation import NSURL  # noqa: PLC0415

        start = time.perf_counter()
        compiled, error = CoreML.MLModel.compileModelAtURL_error_(NSURL.fileURLWithPath_(str(model_path)), None)
        if compiled is None:
            raise BackendUnavailable(f"Core ML could not compile {model_path.name}: {_describe(error)}")
        provider = _batch_provider(CoreML, input_name, label_name, inputs, labels)
        config = CoreML.MLModelConfiguration.alloc().init()
        config.setComputeUnits_(CoreML.MLComputeUnitsAll)

        finished = threading.Event()
        losses: list[float] = []
        outcome: dict[str, Any] = {}
        loss_key, epoch_key = CoreML.MLMetricKey.lossValue(), CoreML.MLMetricKey.epochIndex()

        def on_progress(context: Any) -> None:
            metrics = context.metrics()
            loss = float(metrics[loss_key])
            losses.append(loss)
            if on_epoch is not None:
                on_epoch(int(metrics[epoch_key]), loss)

        def on_complete(context: Any) -> None:
            try:
                task = context.task()
                if task.state() == CoreML.MLTaskStateFailed:
                    outcome["error"] = _describe(task.error())
                    return
                updated = context.model()
                outcome["weights"] = {name: _layer_weights(CoreML, updated, name) for name in layer_names}
                if out_dir is not None:
                    target = out_dir / (model_path.stem + "-updated.mlmodelc")
                    ok, write_error = updated.writeToURL_error_(NSURL.fileURLWithPath_(str(target)), None)
                    outcome["compiled"] = target if ok else None
            except Exception as exc:  # reported to the caller's thread, never lost in Core ML's queue
                outcome["error"] = f"{type(exc).__name__}: {exc}"
            finally:
                finished.set()

        handlers = CoreML.MLUpdateProgressHandlers.alloc().initForEvents_progressHandler_completionHandler_(
            CoreML.MLUpdateProgressEventEpochEnd, on_progress, on_complete
        )
        task, error = CoreML.MLUpdateTask.updateTaskForModelAtURL_trainingData_configuration_progressHandlers_error_(
            compiled, provider, config, handlers, None
        )
        if task is None:
            raise BackendUnavailable(f"MLUpdateTask could not start: {_describe(error)}")
        task.resume()
        if not finished.wait(timeout_s):
            task.cancel()
            raise BackendUnavailable(f"MLUpdateTask did not finish within {timeout_s} s")
        if "error" in outcome:
            raise BackendUnavailable(f"MLUpdateTask failed: {outcome['error']}")
        return UpdateResult(
            weights=outcome["weights"],
            epoch_losses=losses,
            seconds=time.perf_counter() - start,
            compiled_model=outcome.get("compiled"),
        )


def _describe(error: Any) -> str:
    return str(error.localizedDescription()) if error is not None else "no reason given"


def multiarray_view(array: Any) -> np.ndarray:
    """A numpy view of an MLMultiArray's memory (pyobjc exposes its void* as a varlist)."""
    shape = [int(s) for s in array.shape()]
    strides = [int(s) for s in array.strides()]  # in elements
    dtype = np.dtype(_NUMPY_DTYPE[int(array.dataType())])
    extent = 1 + sum((d - 1) * s for d, s in zip(shape, strides, strict=False)) if all(shape) else 0
    buffer = array.dataPointer().as_buffer(extent * dtype.itemsize)
    return np.ndarray(shape, dtype=dtype, buffer=buffer, strides=[s * dtype.itemsize for s in strides])


def _batch_provider(CoreML: Any, input_name: str, label_name: str, inputs: np.ndarray, labels: np.ndarray) -> Any:
    providers = []
    for row, label in zip(inputs, labels, strict=False):
        array, error = CoreML.MLMultiArray.alloc().initWithShape_dataType_error_(
            list(row.shape), CoreML.MLMultiArrayDataTypeFloat32, None
        )
        if array is None:
            raise BackendUnavailable(f"MLMultiArray allocation failed: {_describe(error)}")
        multiarray_view(array)[...] = row
        features = {
            input_name: CoreML.MLFeatureValue.featureValueWithMultiArray_(array),
            label_name: CoreML.MLFeatureValue.featureValueWithInt64_(int(label)),
        }
        provider, error = CoreML.MLDictionaryFeatureProvider.alloc().initWithDictionary_error_(features, None)
        if provider is None:
            raise BackendUnavailable(f"training example rejected: {_describe(error)}")
        providers.append(provider)
    return CoreML.MLArrayBatchProvider.alloc().initWithFeatureProviderArray_(providers)


def _layer_weights(CoreML: Any, model: Any, layer: str) -> dict[str, np.ndarray]:
    out: dict[str, np.ndarray] = {}
    for key, parameter in (("weights", CoreML.MLParameterKey.weights()), ("biases", CoreML.MLParameterKey.biases())):
        value, error = model.parameterValueForKey_error_(parameter.scopedTo_(layer), None)
        if value is not None:
            out[key] = np.array(multiarray_view(value), dtype=np.float32).reshape(-1)
    return out
