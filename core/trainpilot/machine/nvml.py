"""Reaching NVML (the `pynvml` module of nvidia-ml-py, the `cuda` extra), for the CUDA sampler
(utilisation) and the energy meter (joules) alike: one import and one handle, so neither depends on
the other."""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any

NEEDS_NVML = "needs NVML (pip install nvidia-ml-py, the `cuda` extra)"


def import_nvml() -> ModuleType | None:
    try:
        return importlib.import_module("pynvml")
    except ImportError:
        return None


def device_handle(nvml: ModuleType, index: int) -> Any:
    nvml.nvmlInit()
    return nvml.nvmlDeviceGetHandleByIndex(index)
