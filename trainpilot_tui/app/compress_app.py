"""The compression view on its own, as an app (the main app opens the same screen with `x`)."""
from __future__ import annotations

from typing import Any

from textual.app import App

from trainpilot.compress import CompressConfig

from .screens.compression import CompressionScreen, Job, default_job
from .themes import DEFAULT_THEME, SHIPPED_THEMES


class CompressionApp(App[None]):
    TITLE = "TrainPilot compression"

    def __init__(self, config: CompressConfig, job: Job = default_job, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.config = config
        self.screen_view = CompressionScreen(config, job)
        for theme in SHIPPED_THEMES:
            self.register_theme(theme)
        self.theme = DEFAULT_THEME

    def on_mount(self) -> None:
        self.push_screen(self.screen_view, callback=lambda _r: self.exit())
