"""transformers (with Accelerate, which its Trainer needs) is an optional extra: imported only when it
is used, with one line saying how to get it."""

from __future__ import annotations

from typing import Any

INSTALL_HINT = 'pip install "train-pilot[huggingface]"'


def require_transformers() -> Any:
    """The `transformers` module, or an ImportError that says how to install it (and Accelerate,
    without which a Trainer cannot set up its device)."""
    try:
        import accelerate  # noqa: F401 - the Trainer's device set-up imports it; missing, it fails late
        import transformers
    except ImportError as exc:
        raise ImportError(
            f"trainpilot.huggingface needs transformers and accelerate, which are not installed: {INSTALL_HINT}"
        ) from exc
    return transformers
