"""`trainpilot-tui`: the interactive app. Takes the same training options as `trainpilot headless run`
(the option definitions, help texts included, are taken from that command at import, so the two
cannot drift), plus --theme and --refresh-hz. Textual is imported only when the app starts, so --help answers at once.

Exit codes: 0 normal exit (a run quit mid-way is checkpointed, which is normal), 1 the last run
failed, 2 usage error (bad option, unknown theme, malformed theme file).

`tui_command` is built on first access (a module __getattr__), not at import: `trainpilot tui`
(trainpilot_tui.cli.commands) imports it from here, and it is made from trainpilot_tui.cli.run, so
this module never imports the CLI package while it is itself half-initialised, whichever of the two
entry points starts first.
"""
from __future__ import annotations

import inspect
import sys
import typing
from typing import Any, Optional

import typer

EXIT_OK, EXIT_FAILURE, EXIT_USAGE = 0, 1, 2  # as trainpilot_tui.cli.common (a test checks they agree)

THEME_HELP = (
    "Theme: trainpilot-dark (default), trainpilot-light, any Textual theme, a theme file's name from"
    " ./themes or TRAINPILOT_HOME/themes, or a path to a .toml theme file. `t` cycles themes in the app."
)
REFRESH_HELP = (
    "How often the app samples the hardware and paints, per second (at most 10). Default: 1, and"
    " 0.5 while the run's plan trains on every core. Each paint is CPU taken from the training it"
    " shows: at 2 Hz the app used about twice the CPU it uses at 1 Hz, and on a machine whose cores"
    " all train that is training time. A rate given here is kept whatever the plan."
)
MAX_REFRESH_HZ = 10.0


def _training_parameters() -> list[inspect.Parameter]:
    """The parameters of `headless run` that build the SessionConfig (all but its output options),
    with their typer.Option objects and resolved types: one definition serves both commands, so a
    new training option reaches the app without touching this file."""
    from trainpilot_tui.cli.options import session_config
    from trainpilot_tui.cli.run import run_command

    hints = typing.get_type_hints(run_command)
    config_keys = set(inspect.signature(session_config).parameters)
    return [
        p.replace(annotation=hints[p.name], kind=inspect.Parameter.KEYWORD_ONLY)
        for p in inspect.signature(run_command).parameters.values()
        if p.name in config_keys
    ]


def resolve_theme(value: str | None) -> tuple[str | None, list[Any]]:
    """(theme name, themes to register) for --theme. A file is loaded and validated; a name must be
    known. Raises ConfigError with one line when neither works."""
    from textual.theme import BUILTIN_THEMES

    from trainpilot.errors import ConfigError

    from .app.themes import SHIPPED_THEMES, discover_themes, load_theme_file, looks_like_file

    if value is None:
        return None, []
    if looks_like_file(value):
        theme = load_theme_file(value)
        return theme.name, [theme]
    known = {t.name for t in SHIPPED_THEMES} | set(BUILTIN_THEMES)
    user_themes, _errors = discover_themes()
    known |= {t.name for t in user_themes}
    if value not in known:
        shipped = ", ".join(t.name for t in SHIPPED_THEMES)
        user = f"; theme files: {', '.join(t.name for t in user_themes)}" if user_themes else ""
        raise ConfigError(f"unknown theme '{value}' (shipped: {shipped}{user}; or a path to a .toml theme file)")
    return value, []


def check_refresh_hz(value: float | None) -> float | None:
    """--refresh-hz as given, or ConfigError with one line."""
    from trainpilot.errors import ConfigError

    if value is not None and not 0 < value <= MAX_REFRESH_HZ:
        raise ConfigError(f"--refresh-hz must be above 0 and at most {MAX_REFRESH_HZ:g} (got {value:g})")
    return value


def launch(config: Any, theme: str | None = None, refresh_hz: float | None = None) -> int:
    """Run the app on `config` (a trainpilot.run.session.SessionConfig; `resume=RUN_ID` continues a run).
    `refresh_hz`: None for the app's default. Returns the exit code."""
    from trainpilot.errors import TrainPilotError

    try:
        name, extra = resolve_theme(theme)
        check_refresh_hz(refresh_hz)
    except TrainPilotError as exc:
        typer.echo(f"error: {exc}", err=True)
        return EXIT_USAGE
    from .app import TrainPilotApp

    app = TrainPilotApp(config, theme=name, extra_themes=extra, **({} if refresh_hz is None else {"refresh_hz": refresh_hz}))
    code = app.run()
    if app.return_code not in (None, 0):
        return app.return_code or EXIT_FAILURE  # Textual's own failure (e.g. a crash it reported)
    return code if isinstance(code, int) else EXIT_OK


def _run_tui(**options: Any) -> None:
    """Open TrainPilot's terminal app: live hardware, the agent's reasoning, predicted vs actual time.

    Keys: o override the backend (c/a/m/g: cpu/ane/mps/cuda), p pause/resume, n new run, r re-plan, t theme, q quit (mid-run: confirm, checkpoint, then exit); ctrl+p lists every command.
    """
    from trainpilot_tui.cli.options import session_config

    theme = options.pop("theme", None)
    refresh_hz = options.pop("refresh_hz", None)
    config = session_config(**options)
    raise typer.Exit(launch(config, theme=theme, refresh_hz=refresh_hz))


def _build_tui_command() -> Any:
    theme = inspect.Parameter("theme", inspect.Parameter.KEYWORD_ONLY, default=typer.Option(None, "--theme", help=THEME_HELP), annotation=Optional[str])
    refresh = inspect.Parameter("refresh_hz", inspect.Parameter.KEYWORD_ONLY, default=typer.Option(None, "--refresh-hz", help=REFRESH_HELP),
                                annotation=Optional[float])
    signature = inspect.Signature([*_training_parameters(), theme, refresh])
    _run_tui.__signature__ = signature  # type: ignore[attr-defined]
    _run_tui.__annotations__ = {p.name: p.annotation for p in signature.parameters.values()}
    return _run_tui


def __getattr__(name: str) -> Any:
    if name == "tui_command":  # the typer command: `headless run`'s training options plus --theme and --refresh-hz
        command = globals()["tui_command"] = _build_tui_command()
        return command
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def main(argv: list[str] | None = None) -> int:
    """Entry point of `trainpilot-tui`; returns the exit code."""
    from trainpilot.errors import TrainPilotError

    app = typer.Typer(add_completion=False, pretty_exceptions_enable=False, context_settings={"help_option_names": ["-h", "--help"]})
    app.command()(__getattr__("tui_command"))
    try:
        app(args=argv if argv is not None else sys.argv[1:], prog_name="trainpilot-tui", standalone_mode=True)
    except SystemExit as exc:
        return int(exc.code or 0) if not isinstance(exc.code, str) else EXIT_FAILURE
    except TrainPilotError as exc:
        typer.echo(f"error: {exc}", err=True)
        return EXIT_FAILURE
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
