"""Every user interface of TrainPilot: the Typer CLI (headless commands) and the Textual app."""
