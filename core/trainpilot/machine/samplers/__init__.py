"""Accelerator samplers for `monitor.Monitor` (each returns a list of `monitor.Reading`).

`apple.ApplePowerSampler`: ANE / GPU / CPU power on Apple Silicon via powermetrics, macmon or
mactop (estimates, shown "W, est."); elsewhere a single "ANE power: n/a: not Apple Silicon".
`cuda.CudaSampler`: GPU utilisation and memory via NVML or torch.cuda.
"""

from __future__ import annotations

import platform

from trainpilot.machine.monitor import AcceleratorSampler
from trainpilot.machine.samplers.apple import ApplePowerSampler, choose_power_tool
from trainpilot.machine.samplers.cuda import CudaSampler


def default_samplers(system: str | None = None) -> list[AcceleratorSampler]:
    """The samplers for this platform: the Apple one everywhere (off Apple Silicon it only says
    why there is no ANE reading), plus CUDA off macOS. Samplers that start a tool have `close()`;
    call `close_samplers` when the monitor is done."""
    samplers: list[AcceleratorSampler] = [ApplePowerSampler()]
    if (system or platform.system()) != "Darwin":
        samplers.append(CudaSampler())
    return samplers


def close_samplers(samplers: list[AcceleratorSampler]) -> None:
    for sampler in samplers:
        close = getattr(sampler, "close", None)
        if callable(close):
            close()


__all__ = ["ApplePowerSampler", "CudaSampler", "choose_power_tool", "close_samplers", "default_samplers"]
