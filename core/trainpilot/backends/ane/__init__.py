"""The Apple Neural Engine backend, through Core ML (coremltools; pyobjc-framework-CoreML for updates).

Modules, one concept each: `coreml_import` (lazy, quiet coremltools), `split` (backbone/head),
`convert` (.mlpackage), `features` (batched feature cache), `updatable` (updatable .mlmodel),
`placement` (MLComputePlan figures), `runtime` (the only macOS-only calls), `backend` (the
Backend protocol). Importing this package imports neither coremltools nor torch.
"""

from __future__ import annotations

from trainpilot.backends.ane.backend import (
    CORE_ML_UPDATE,
    FROZEN_BACKBONE,
    MODES,
    AneBackend,
    ExportReport,
    PlatformFacts,
    UpdateReport,
)

__all__ = ["AneBackend", "CORE_ML_UPDATE", "ExportReport", "FROZEN_BACKBONE", "MODES", "PlatformFacts", "UpdateReport"]
