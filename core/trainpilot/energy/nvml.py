"""CUDA energy through NVML (the `pynvml` module of nvidia-ml-py, the `cuda` extra).

Volta and newer GPUs keep an energy counter (`nvmlDeviceGetTotalEnergyConsumption`, millijoules
since the driver loaded): read it at both ends. Older ones only report power
(`nvmlDeviceGetPowerUsage`, milliwatts), which is integrated over time (integrate.py). One small
adapter, so the meter never sees which of the two a device has.
"""

from __future__ import annotations

import threading
from types import ModuleType
from typing import Any

from trainpilot.energy.integrate import IntegratedPower
from trainpilot.machine.nvml import NEEDS_NVML, import_nvml
from trainpilot.machine.nvml import device_handle as _handle
from trainpilot.plans import Availability


def nvml_availability(index: int = 0, nvml: ModuleType | None | str = "auto") -> Availability:
    module = import_nvml() if nvml == "auto" else nvml
    if module is None:
        return Availability(False, NEEDS_NVML)
    try:
        _handle(module, index)  # type: ignore[arg-type]
    except Exception as exc:  # NVMLError: no driver, no such device
        return Availability(False, f"NVML: {exc}")
    return Availability(True)


class _EnergyCounter:
    def __init__(self, nvml: ModuleType, handle: Any, index: int):
        self._nvml, self._handle = nvml, handle
        self.source = "measured: NVML energy counter" + (f" (GPU {index})" if index else "")
        self.estimated = False
        self.poll_interval_s = 30.0  # a 64-bit millijoule counter does not wrap
        self._lock = threading.Lock()
        self._start_mj = int(nvml.nvmlDeviceGetTotalEnergyConsumption(handle))

    def read_j(self) -> float:
        with self._lock:
            return (int(self._nvml.nvmlDeviceGetTotalEnergyConsumption(self._handle)) - self._start_mj) / 1e3

    def close(self) -> None:
        pass


def nvml_energy(index: int = 0, nvml: ModuleType | None | str = "auto") -> Any:
    """An energy source for CUDA device `index`: the energy counter where the GPU has one, else
    its power integrated over time. Raises OSError with the reason when NVML cannot be used."""
    module = import_nvml() if nvml == "auto" else nvml
    if module is None:
        raise OSError(NEEDS_NVML)
    try:
        handle = _handle(module, index)  # type: ignore[arg-type]
    except Exception as exc:
        raise OSError(f"NVML: {exc}") from None
    try:
        return _EnergyCounter(module, handle, index)  # type: ignore[arg-type]
    except Exception:  # NVMLError_NotSupported before Volta: fall back to power x time
        pass

    def read_w() -> float | None:
        try:
            return float(module.nvmlDeviceGetPowerUsage(handle)) / 1e3  # type: ignore[union-attr]
        except Exception:
            return None

    if read_w() is None:
        raise OSError("NVML reports neither energy nor power for this GPU")
    suffix = f" (GPU {index})" if index else ""
    return IntegratedPower(read_w, f"measured: NVML power x time{suffix}", estimated=False, poll_interval_s=0.1)
