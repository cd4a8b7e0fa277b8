"""CUDA sampler: GPU utilisation and memory through NVML, or memory alone through torch.cuda.

NVML (the `pynvml` module of nvidia-ml-py) reports utilisation and device memory and costs
microseconds per call. Without it, torch.cuda still reports device memory (mem_get_info), but
utilisation has no source, so it is shown as n/a with the package that would provide it.
"""

from __future__ import annotations

import sys
from types import ModuleType
from typing import Any, Literal

from trainpilot.machine.monitor import Reading
from trainpilot.machine.nvml import NEEDS_NVML, import_nvml

GIB = 2**30


class CudaSampler:
    """A monitor.AcceleratorSampler for one CUDA device."""

    __name__ = "cuda"

    def __init__(
        self, device_index: int = 0, *, nvml: ModuleType | None | Literal["auto"] = "auto", torch_cuda: Any = None
    ):
        """nvml: "auto" imports pynvml when installed; None skips NVML; a module is used as given."""
        self.device_index = device_index
        self._nvml_module: ModuleType | None = import_nvml() if nvml == "auto" else nvml
        self._nvml_handle: Any = None
        self._nvml_problem = "" if self._nvml_module is not None else NEEDS_NVML
        self._torch_cuda = torch_cuda

    def _nvml(self) -> Any:
        """The NVML device handle, initialised on first use; None (with the reason kept) if absent."""
        if self._nvml_handle is None and not self._nvml_problem:
            nvml = self._nvml_module
            assert nvml is not None  # no module: _nvml_problem says so
            try:
                nvml.nvmlInit()
                self._nvml_handle = nvml.nvmlDeviceGetHandleByIndex(self.device_index)
            except Exception as exc:  # NVMLError: no driver, no device...
                self._nvml_problem = f"NVML: {exc}"
        return self._nvml_handle

    def _cuda(self) -> Any:
        """torch.cuda once torch is loaded. Importing torch here would stall the first sample for
        seconds (the UI samples at 2+ Hz), so until the session has loaded it there is no value."""
        if self._torch_cuda is None:
            torch = sys.modules.get("torch")
            # Present in sys.modules is not loaded: another thread may be half way through `import torch`.
            if (
                torch is None
                or getattr(getattr(torch, "__spec__", None), "_initializing", False)
                or not hasattr(torch, "cuda")
            ):
                return None
            self._torch_cuda = torch.cuda
        return self._torch_cuda

    def __call__(self) -> list[Reading]:
        handle = self._nvml()
        if handle is not None:
            nvml = self._nvml_module
            assert nvml is not None  # the handle came from it
            util = nvml.nvmlDeviceGetUtilizationRates(handle)
            memory = nvml.nvmlDeviceGetMemoryInfo(handle)
            return [
                Reading("GPU utilisation", float(util.gpu), "%", note="via NVML"),
                Reading("GPU memory", memory.used / GIB, "GiB", note=f"of {memory.total / GIB:.1f} GiB, via NVML"),
            ]
        cuda = self._cuda()
        if cuda is None:
            reason = "waiting for PyTorch to load"
            return [
                Reading("GPU utilisation", None, "%", note=self._nvml_problem if self._nvml_module else reason),
                Reading("GPU memory", None, "GiB", note=reason),
            ]
        if not cuda.is_available():
            reason = "no CUDA device (torch.cuda.is_available() is False)"
            return [Reading("GPU utilisation", None, "%", note=reason), Reading("GPU memory", None, "GiB", note=reason)]
        free, total = cuda.mem_get_info(self.device_index)
        return [
            Reading("GPU utilisation", None, "%", note=self._nvml_problem or NEEDS_NVML),
            Reading("GPU memory", (total - free) / GIB, "GiB", note=f"of {total / GIB:.1f} GiB, via torch.cuda"),
        ]

    def close(self) -> None:
        if self._nvml_handle is not None and self._nvml_module is not None:  # a handle came from a module
            try:
                self._nvml_module.nvmlShutdown()
            except Exception:
                pass
            self._nvml_handle = None
