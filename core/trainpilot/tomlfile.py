"""Reading TOML files a user may have written (hardware profiles, themes): every problem, from a
missing file to bytes that are not UTF-8, is one ConfigError line naming the file."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from trainpilot.errors import ConfigError


def read_toml(path: Path, what: str) -> dict[str, Any]:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # Python 3.10
        try:
            import tomli as tomllib
        except ModuleNotFoundError:
            raise ConfigError(f"reading {what} files needs Python 3.11+ or the 'tomli' package", path) from None
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"is not UTF-8 text (byte {exc.start})", path) from None
    except OSError as exc:
        raise ConfigError(f"cannot read ({exc.strerror or exc})", path) from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:  # the message carries line and column
        raise ConfigError(f"not valid TOML: {exc}", path) from None
