"""Lightning is an optional extra: imported only when it is used, with one line saying how to get it."""

from __future__ import annotations

from typing import Any

INSTALL_HINT = 'pip install "train-pilot[lightning]"'


def require_lightning() -> Any:
    """`lightning.pytorch`, or an ImportError that says how to install it."""
    try:
        import lightning.pytorch as pl
    except ImportError as exc:
        raise ImportError(f"trainpilot.lightning needs Lightning, which is not installed: {INSTALL_HINT}") from exc
    return pl
