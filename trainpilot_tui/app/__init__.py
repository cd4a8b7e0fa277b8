"""The Textual app `trainpilot-tui`: live utilisation, the agent's reasoning, predicted vs actual
time, and keyboard overrides mid-session. See app.py for the data flow."""
from .app import BACKEND_KEYS, TrainPilotApp, training_session

__all__ = ["BACKEND_KEYS", "TrainPilotApp", "training_session"]
