"""torch.compile as a CPU plan setting ("cpu (2 threads, compiled)").

Compiling trades a one-off cost (inductor generates and builds C++ for the forward and backward
graphs: seconds per graph even for small networks; measured: docs/measurements.md#cited-in-the-code-prediction)
for a possibly faster step. Whether it pays depends on the machine, the model and how long the run
is, so it is a plan like any other: the cost model predicts it once `trainpilot headless calibrate
--compile` has measured both sides (predict/compile_cost.py), and the agent picks it only where
the prediction says it wins. On the 2-core machine this was built on it never did
(benchmarks/compile_pays.py; measured: docs/measurements.md#torchcompile).

`dynamic=False`: the last, smaller batch of an epoch gets its own static graph (one recompile,
which the cost model counts) instead of turning every step into dynamic-shape code.
"""

from __future__ import annotations

import os
import shutil
import sysconfig
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

from trainpilot.plans import COMPILED, Availability

if TYPE_CHECKING:
    import torch

__all__ = ["COMPILED", "compile_availability", "compile_model"]
_COMPILERS = ("g++", "c++", "clang++")


@lru_cache(maxsize=1)
def compile_availability() -> Availability:
    """Whether inductor can build code here: it needs a C++ compiler and the Python headers.
    Checked without importing torch's compiler stack (that alone takes seconds)."""
    wanted = os.environ.get("CXX")
    found = shutil.which(wanted) if wanted else next((c for c in map(shutil.which, _COMPILERS) if c), None)
    if not found:
        return Availability(
            False, f"no C++ compiler ({wanted or ' / '.join(_COMPILERS)} not on PATH); torch.compile builds C++ code"
        )
    include = sysconfig.get_paths().get("include") or ""
    if not (Path(include) / "Python.h").is_file():
        return Availability(False, f"no Python headers ({include}/Python.h); torch.compile builds a Python extension")
    return Availability(True)


def compile_model(model: torch.nn.Module) -> torch.nn.Module:
    """The compiled module that trains (it shares its parameters with `model`, so the optimizer,
    checkpoints and a switch back to eager see the same tensors). Earlier compiled graphs are
    dropped first: inductor bakes the thread count into its code, so a compiled plan with other
    threads must compile anew rather than reuse them."""
    import torch

    torch._dynamo.reset()
    compiled = torch.compile(model, dynamic=False)
    assert isinstance(compiled, torch.nn.Module)  # an OptimizedModule (torch.compile is typed for any callable)
    return compiled
