"""Which mixed precisions a device runs natively, with the reason when it does not.

Autocast to bf16 or fp16 changes a step's speed only where the hardware has the instructions:
CUDA tensor cores, Apple GPUs, CPUs with AVX512-BF16 / AMX (x86) or BF16 (Arm). Elsewhere PyTorch
emulates it, which is slower than fp32 and rounds anyway, so such plans are listed as excluded
with this module's reason instead of being predicted.
"""

from __future__ import annotations

import platform
import subprocess
from functools import lru_cache

from trainpilot.plans import Availability, Plan

# x86 /proc/cpuinfo flags and Arm "Features" words that mean native arithmetic in that type
_CPU_FLAGS = {"bf16": ("avx512_bf16", "amx_bf16", "bf16"), "fp16": ("avx512_fp16", "amx_fp16", "fphp")}


@lru_cache(maxsize=1)
def cpu_flags() -> frozenset[str]:
    """The CPU's feature flags (Linux /proc/cpuinfo; macOS sysctl), lower case; empty if unknown."""
    if platform.system() == "Darwin":
        return _darwin_flags()
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip() in ("flags", "Features"):
                    return frozenset(value.lower().split())
    except OSError:
        pass
    return frozenset()


def _darwin_flags() -> frozenset[str]:
    """Apple Silicon's BF16/FP16 as `sysctl hw.optional.arm.FEAT_*` reports them."""
    found = set()
    for feature, flag in (("FEAT_BF16", "bf16"), ("FEAT_FP16", "fphp")):
        try:
            out = subprocess.run(
                ["sysctl", "-n", f"hw.optional.arm.{feature}"], capture_output=True, text=True, timeout=5, check=False
            ).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            continue
        if out == "1":
            found.add(flag)
    return frozenset(found)


def cpu_vector_isa() -> str:
    """What PyTorch's CPU kernels were dispatched to (avx2, avx512, ...), for the reason text."""
    try:
        import torch

        return str(torch.backends.cpu.get_cpu_capability()).lower()
    except Exception:  # an old torch without it: the machine's architecture says enough
        return platform.machine().lower()


def native_precision(plan: Plan, precision: str, flags: frozenset[str] | None = None) -> Availability:
    """Whether `plan`'s device runs `precision` ("bf16" | "fp16") natively. `flags` stands in for
    the CPU's own (tests ask about other CPUs through it)."""
    if precision in ("fp32", ""):
        return Availability(True)
    if plan.workers:  # a split: every worker's device must
        for worker in plan.workers:
            found = native_precision(worker, precision, flags)
            if not found:
                return found
        return Availability(True)
    if plan.backend == "cpu":
        have = cpu_flags() if flags is None else flags
        if any(f in have for f in _CPU_FLAGS[precision]):
            return Availability(True)
        return Availability(False, f"this CPU has no native {precision} ({cpu_vector_isa()})")
    if plan.backend == "cuda":
        return _cuda(plan, precision)
    if plan.backend == "mps":
        return _mps(precision)
    return Availability(False, f"{plan.backend} trains in fp32 only")


def _cuda(plan: Plan, precision: str) -> Availability:
    import torch

    index = torch.device(plan.device or "cuda").index or 0
    major, minor = torch.cuda.get_device_capability(index)
    if precision == "fp16" and major >= 7:
        return Availability(True)
    if precision == "bf16" and major >= 8:
        return Availability(True)
    need = "7.0 (tensor cores)" if precision == "fp16" else "8.0 (Ampere)"
    return Availability(
        False, f"this GPU (compute capability {major}.{minor}) has no native {precision}; it needs {need}"
    )


def _mps(precision: str) -> Availability:
    if precision == "fp16":
        return Availability(True)
    import torch

    if torch.backends.mps.is_macos_or_newer(14, 0):
        return Availability(True)
    return Availability(False, "bf16 on Apple GPUs needs macOS 14 or newer")
