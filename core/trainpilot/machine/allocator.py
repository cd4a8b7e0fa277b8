"""Keep freed memory in the process, so a training step does not fault its buffers in afresh.

Every training step allocates its activations and gradients and frees them again. glibc's malloc
serves blocks over its mmap threshold (128 KiB at first, raised as it goes) with fresh mappings, and
trims the top of the heap once more than its trim threshold is free, so memory goes back to the
kernel after one step and has to be faulted in, page by page and zeroed, in the next. Measured here
(benchmarks/allocator.py --plain, 2 cores, torch 2.13): hundreds of thousands of page faults per
epoch of small_cnn, wide_cnn and large_dense in a plain loop on the demo set, whose epochs kept
memory shortened, with about no faults left; in TrainPilot's own runs it shortened large_dense's
epochs (glibc's adaptive threshold had already spared the others most faults). The
faults also made step times noisy, and the compression's measured speed-ups with them:
benchmarks/step_noise.py (one dense / pruned pair, 12 timings in 4 processes) spread far wider
with glibc's defaults than with freed memory kept (measured: docs/measurements.md#memory-allocator).

So TrainPilot sets three glibc malloc parameters at the start of a training process: blocks up to
MMAP_THRESHOLD come from the heap, the heap keeps up to TRIM_THRESHOLD free at its top, and grows
TOP_PAD beyond each request. The price is memory the process holds after a peak (at most
TRIM_THRESHOLD more than it uses). This is what the environment variables MALLOC_MMAP_THRESHOLD_,
MALLOC_TRIM_THRESHOLD_ and MALLOC_TOP_PAD_ do at start-up, done with mallopt(3) from the running
process; PyTorch's CPU tuning guide reaches the same end with jemalloc or tcmalloc preloaded,
which would need a restart under LD_PRELOAD.

Only glibc has mallopt with these meanings: on macOS, musl or Windows nothing is changed and the
setting says why. TRAINPILOT_KEEP_FREED_MEMORY=0 turns it off (a process that must give memory back).
"""

from __future__ import annotations

import ctypes
import os
import platform
import threading
from dataclasses import dataclass

# mallopt(3) parameter numbers, from glibc's malloc.h
M_TRIM_THRESHOLD = -1
M_TOP_PAD = -2
M_MMAP_THRESHOLD = -3

MIB = 1 << 20
# glibc's own ceiling for the mmap threshold on 64-bit (DEFAULT_MMAP_THRESHOLD_MAX): buffers above
# it are rare per step and large enough that faulting them in is a small share of their work.
MMAP_THRESHOLD = 32 * MIB
TRIM_THRESHOLD = 256 * MIB
TOP_PAD = 64 * MIB
OFF_SWITCH = "TRAINPILOT_KEEP_FREED_MEMORY"


@dataclass(frozen=True)
class AllocatorSetting:
    applied: bool  # the parameters are in force in this process
    text: str  # what was done, or why not, for the agent's trace


_lock = threading.Lock()
_setting: AllocatorSetting | None = None


def keep_freed_memory() -> AllocatorSetting:
    """Apply the malloc parameters once per process (later calls return the first call's outcome)."""
    global _setting
    with _lock:
        if _setting is None:
            _setting = _apply()
        return _setting


def _apply() -> AllocatorSetting:
    if os.environ.get(OFF_SWITCH, "").strip() == "0":
        return AllocatorSetting(False, f"malloc left as it is ({OFF_SWITCH}=0): freed memory goes back to the kernel")
    libc_name, _ = platform.libc_ver()
    if libc_name != "glibc":
        return AllocatorSetting(
            False, f"malloc left as it is: not glibc ({platform.system()}{', ' + libc_name if libc_name else ''})"
        )
    try:
        # the process's own symbols, glibc's among them: find_library would run ldconfig in a subprocess
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError) as exc:
        return AllocatorSetting(False, f"malloc left as it is: mallopt not found ({exc})")
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    # mallopt returns 1 on success, 0 on error
    done = all(
        mallopt(param, value) == 1
        for param, value in (
            (M_MMAP_THRESHOLD, MMAP_THRESHOLD),
            (M_TRIM_THRESHOLD, TRIM_THRESHOLD),
            (M_TOP_PAD, TOP_PAD),
        )
    )
    if not done:
        return AllocatorSetting(False, "malloc left as it is: glibc refused a mallopt parameter")
    return AllocatorSetting(
        True,
        f"freed memory kept in the process (glibc: buffers up to {MMAP_THRESHOLD // MIB} MiB from the heap,"
        f" {TRIM_THRESHOLD // MIB} MiB kept free), so no step faults its buffers in afresh",
    )
