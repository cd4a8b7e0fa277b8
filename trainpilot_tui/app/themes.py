"""Themes: the two shipped ones as Textual `Theme` objects, and user theme files (TOML) loaded and
validated from the theme folders.

Every colour on screen comes from a theme variable ($primary, $surface, ...), so a theme file that
names a handful of colours restyles the whole app. A malformed file is reported in one line
(file: problem) and skipped; it never stops the app.

Theme file format (see themes/ember.toml):

    name = "ember"            # required: lowercase letters, digits and dashes
    dark = true               # optional, default true
    primary = "#E07A3F"       # required
    secondary = "..."         # optional: accent, warning, error, success, foreground,
                              #           background, surface, panel, boost
    [variables]               # optional: any Textual design variable, e.g.
    "footer-key-foreground" = "#E07A3F"
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from textual.color import Color, ColorParseError
from textual.theme import Theme

from trainpilot.errors import ConfigError
from trainpilot.tomlfile import read_toml

TRAINPILOT_DARK = Theme(
    name="trainpilot-dark",
    dark=True,
    primary="#4FB3BF",
    secondary="#9D8FE0",
    accent="#F2A65A",
    warning="#E8C547",
    error="#E5676B",
    success="#6CC27A",
    foreground="#D8DEE6",
    background="#0E1319",
    surface="#151C25",
    panel="#1F2A36",
)

TRAINPILOT_LIGHT = Theme(
    name="trainpilot-light",
    dark=False,
    primary="#1D6F8A",
    secondary="#5B4BC4",
    accent="#B5541A",
    warning="#8A6100",
    error="#B3261E",
    success="#2C7A33",
    foreground="#1C2430",
    background="#F4F6F8",
    surface="#FFFFFF",
    panel="#E3E8EE",
)

SHIPPED_THEMES: tuple[Theme, ...] = (TRAINPILOT_DARK, TRAINPILOT_LIGHT)
DEFAULT_THEME = TRAINPILOT_DARK.name

_COLOUR_KEYS = ("primary", "secondary", "accent", "warning", "error", "success", "foreground", "background", "surface", "panel", "boost")
_NAME = re.compile(r"^[a-z0-9][a-z0-9-]{0,39}$")
THEME_SUFFIX = ".toml"


def theme_dirs() -> list[Path]:
    """Where theme files are looked for, first wins on a name clash: ./themes (a checkout, or the
    user's working folder), then TrainPilot's data folder (TRAINPILOT_HOME/themes)."""
    from trainpilot.paths import data_home

    dirs = [Path.cwd() / "themes", data_home() / "themes"]
    unique: list[Path] = []
    for d in dirs:
        if d.resolve() not in [u.resolve() for u in unique]:
            unique.append(d)
    return unique


def _read_toml(path: Path) -> dict[str, Any]:
    return read_toml(path, "theme")


def _colour(path: Path, key: str, value: Any) -> str:
    if not isinstance(value, str):
        raise ConfigError(f"'{key}' must be a colour string like \"#4FB3BF\", got {value!r}", path)
    try:
        Color.parse(value)
    except ColorParseError:
        raise ConfigError(f"'{key}' is not a colour: {value!r}", path) from None
    return value


def load_theme_file(path: str | Path) -> Theme:
    """Read and validate one theme file. Raises ConfigError (one line: file: problem)."""
    path = Path(path).expanduser()
    data = _read_toml(path)
    unknown = sorted(set(data) - {"name", "dark", "variables", *_COLOUR_KEYS})
    if unknown:
        raise ConfigError(f"unknown key '{unknown[0]}' (allowed: name, dark, variables, {', '.join(_COLOUR_KEYS)})", path)
    name = data.get("name")
    if not isinstance(name, str) or not _NAME.match(name):
        raise ConfigError(f"'name' must be lowercase letters, digits and dashes, got {name!r}", path)
    if "primary" not in data:
        raise ConfigError("missing 'primary' colour", path)
    dark = data.get("dark", True)
    if not isinstance(dark, bool):
        raise ConfigError(f"'dark' must be true or false, got {dark!r}", path)
    colours = {key: _colour(path, key, data[key]) for key in _COLOUR_KEYS if key in data}
    variables = data.get("variables", {})
    if not isinstance(variables, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in variables.items()):
        raise ConfigError("[variables] must map names to strings", path)
    theme = Theme(name=name, dark=dark, variables=dict(variables), **colours)
    try:
        theme.to_color_system().generate()  # catches what only shows when the colours are combined
    except Exception as exc:
        raise ConfigError(f"colours do not combine into a theme: {exc}", path) from None
    return theme


def discover_themes(dirs: list[Path] | None = None) -> tuple[list[Theme], list[str]]:
    """Every valid theme file in the theme folders, and one error line per file that is not."""
    themes: dict[str, Theme] = {}
    errors: list[str] = []
    for directory in dirs if dirs is not None else theme_dirs():
        if not directory.is_dir():
            continue
        for path in sorted(directory.glob(f"*{THEME_SUFFIX}")):
            try:
                theme = load_theme_file(path)
            except ConfigError as exc:
                errors.append(str(exc))
                continue
            themes.setdefault(theme.name, theme)
    return list(themes.values()), errors


def looks_like_file(value: str) -> bool:
    return value.endswith(THEME_SUFFIX) or "/" in value or "\\" in value
