"""The Apple Neural Engine backend, through Core ML (coremltools)."""
from __future__ import annotations

from .backend import AneBackend

__all__ = ["AneBackend"]
