"""Each widget keeps its styles in a .tcss file beside its module (Textual reads CSS_PATH only for
apps and screens, so widgets load theirs into DEFAULT_CSS, which Textual scopes to the widget)."""
from __future__ import annotations

from pathlib import Path


def tcss_beside(module_file: str) -> str:
    return Path(module_file).with_suffix(".tcss").read_text(encoding="utf-8")
