"""Themes: the shipped Theme objects, theme files (valid ones load, malformed ones are one line,
never a crash), and --theme resolution."""
from __future__ import annotations

from pathlib import Path

import pytest

from trainpilot.errors import ConfigError
from trainpilot_tui.app.themes import SHIPPED_THEMES, discover_themes, load_theme_file
from trainpilot_tui.app_main import resolve_theme

from .conftest import notifications, scripted_app, wait_until
from .scripted import SessionFactory

REPO_THEMES = Path(__file__).resolve().parents[2] / "themes"


def write(tmp_path: Path, text: str, name: str = "mine.toml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_shipped_themes_are_one_dark_and_one_light() -> None:
    assert {t.dark for t in SHIPPED_THEMES} == {True, False}
    for theme in SHIPPED_THEMES:
        theme.to_color_system().generate()  # every design variable derives


@pytest.mark.parametrize("path", sorted(REPO_THEMES.glob("*.toml")), ids=lambda p: p.name)
def test_the_theme_files_in_the_repository_load(path: Path) -> None:
    theme = load_theme_file(path)
    assert theme.name == path.stem


def test_a_valid_theme_file_loads_with_its_variables(tmp_path: Path) -> None:
    path = write(tmp_path, 'name = "night-owl"\ndark = true\nprimary = "#82AAFF"\nbackground = "#011627"\n[variables]\n"footer-key-foreground" = "#FFCB6B"\n')
    theme = load_theme_file(path)
    assert (theme.name, theme.primary, theme.background, theme.dark) == ("night-owl", "#82AAFF", "#011627", True)
    assert theme.variables == {"footer-key-foreground": "#FFCB6B"}


@pytest.mark.parametrize(
    "text, problem",
    [
        ('name = "x"\nprimary = "#fff"\nprimary = "#000"\n', "not valid TOML"),
        ('name = "x"\n', "missing 'primary' colour"),
        ('name = "Bad Name"\nprimary = "#fff"\n', "'name' must be lowercase"),
        ('name = "x"\nprimary = "not-a-colour"\n', "'primary' is not a colour"),
        ('name = "x"\nprimary = 12\n', "'primary' must be a colour string"),
        ('name = "x"\nprimary = "#fff"\nprimery = "#fff"\n', "unknown key 'primery'"),
        ('name = "x"\nprimary = "#fff"\ndark = "yes"\n', "'dark' must be true or false"),
        ('name = "x"\nprimary = "#fff"\nvariables = 3\n', "[variables] must map names to strings"),
    ],
)
def test_a_malformed_theme_file_is_one_line_naming_the_file(tmp_path: Path, text: str, problem: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as info:
        load_theme_file(path)
    message = str(info.value)
    assert message.startswith(f"{path}: ") and problem in message and "\n" not in message


def test_discovery_skips_bad_files_and_reports_each_in_one_line(tmp_path: Path) -> None:
    write(tmp_path, 'name = "good"\nprimary = "#336699"\n', "good.toml")
    write(tmp_path, "name = \n", "broken.toml")
    themes, errors = discover_themes([tmp_path, tmp_path / "absent"])
    assert [t.name for t in themes] == ["good"]
    assert len(errors) == 1 and errors[0].startswith(str(tmp_path / "broken.toml"))


def test_resolve_theme_accepts_names_and_files_and_refuses_unknown_names(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert resolve_theme(None) == (None, [])
    assert resolve_theme("trainpilot-light") == ("trainpilot-light", [])
    assert resolve_theme("nord") == ("nord", [])  # Textual's own themes work too
    path = write(tmp_path, 'name = "from-file"\nprimary = "#336699"\n', "from-file.toml")
    name, extra = resolve_theme(str(path))
    assert name == "from-file" and extra[0].primary == "#336699"
    (tmp_path / "themes").mkdir()
    write(tmp_path / "themes", 'name = "local"\nprimary = "#336699"\n', "local.toml")
    assert resolve_theme("local") == ("local", [])
    with pytest.raises(ConfigError, match="unknown theme 'nope'"):
        resolve_theme("nope")
    with pytest.raises(ConfigError, match="no-such.toml: cannot read"):
        resolve_theme(str(tmp_path / "no-such.toml"))


async def test_the_app_loads_user_themes_and_reports_a_malformed_one_without_crashing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "themes").mkdir()
    write(tmp_path / "themes", 'name = "local"\nprimary = "#336699"\n', "local.toml")
    write(tmp_path / "themes", 'name = "x"\nprimary = "#zzz"\n', "bad.toml")
    factory = SessionFactory()
    app = scripted_app(factory, epochs=1, discover_user_themes=True)
    async with app.run_test(size=(100, 30), notifications=True) as pilot:
        await wait_until(pilot, lambda: notifications(app), what="the theme notification")
        assert "local" in app.cycle_names
        assert any("bad.toml: 'primary' is not a colour" in n for n in notifications(app))
        app.theme = "local"
        await pilot.pause()
        assert app.get_css_variables()["primary"].upper() == "#336699"
