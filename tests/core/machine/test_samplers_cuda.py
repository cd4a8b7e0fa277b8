"""The CUDA sampler: NVML first, torch.cuda memory as the fallback, n/a with a reason otherwise."""
from __future__ import annotations

import sys
from types import SimpleNamespace

import pytest

from trainpilot.machine.samplers.cuda import NEEDS_NVML, CudaSampler


class FakeNvml:
    """Stands in for the pynvml module (tests only)."""

    def __init__(self, fail: str | None = None):
        self.fail = fail
        self.calls: list[str] = []

    def nvmlInit(self) -> None:
        self.calls.append("init")
        if self.fail:
            raise RuntimeError(self.fail)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> str:
        return f"gpu{index}"

    def nvmlDeviceGetUtilizationRates(self, handle: str) -> SimpleNamespace:
        return SimpleNamespace(gpu=87, memory=40)

    def nvmlDeviceGetMemoryInfo(self, handle: str) -> SimpleNamespace:
        return SimpleNamespace(total=24 * 2**30, used=6 * 2**30, free=18 * 2**30)

    def nvmlShutdown(self) -> None:
        self.calls.append("shutdown")


class FakeCuda:
    """Stands in for torch.cuda (tests only)."""

    def __init__(self, available: bool):
        self.available = available

    def is_available(self) -> bool:
        return self.available

    def mem_get_info(self, index: int) -> tuple[int, int]:
        return 14 * 2**30, 16 * 2**30


def test_nvml_gives_utilisation_and_memory() -> None:
    nvml = FakeNvml()
    sampler = CudaSampler(nvml=nvml)  # type: ignore[arg-type]
    util, memory = sampler()
    assert (util.name, util.value, util.unit, util.estimate) == ("GPU utilisation", 87.0, "%", False)
    assert (memory.value, memory.unit) == (6.0, "GiB") and "of 24.0 GiB" in memory.note
    sampler()
    assert nvml.calls == ["init"], "NVML is initialised once"
    sampler.close()
    assert nvml.calls[-1] == "shutdown"


def test_without_nvml_torch_cuda_gives_memory_only() -> None:
    util, memory = CudaSampler(nvml=None, torch_cuda=FakeCuda(True))()
    assert util.value is None and util.display == f"n/a: {NEEDS_NVML}"
    assert memory.value == 2.0 and "via torch.cuda" in memory.note


def test_a_broken_driver_is_the_reason_shown() -> None:
    util, memory = CudaSampler(nvml=FakeNvml(fail="Driver Not Loaded"), torch_cuda=FakeCuda(True))()  # type: ignore[arg-type]
    assert util.note == "NVML: Driver Not Loaded" and memory.value == 2.0


def test_no_cuda_device_is_na_not_zero() -> None:
    readings = CudaSampler(nvml=None, torch_cuda=FakeCuda(False))()
    assert [r.value for r in readings] == [None, None]
    assert all("no CUDA device" in r.display for r in readings)


def test_it_never_imports_torch_itself(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delitem(sys.modules, "torch", raising=False)
    readings = CudaSampler(nvml=None)()
    assert "torch" not in sys.modules
    assert readings[1].note == "waiting for PyTorch to load"


def test_this_machine_reports_its_real_state() -> None:
    import torch

    readings = CudaSampler()()
    if not torch.cuda.is_available():
        assert readings[1].display.startswith("n/a: no CUDA device")
    else:
        assert readings[1].value is not None and readings[1].value >= 0
