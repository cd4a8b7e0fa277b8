"""The main screen and the dialogs it opens."""
from .backend_chooser import BackendChooser
from .compression import CompressionScreen
from .confirm_quit import ConfirmQuit
from .main import MainScreen
from .run_picker import RunPicker

__all__ = ["BackendChooser", "CompressionScreen", "ConfirmQuit", "MainScreen", "RunPicker"]
