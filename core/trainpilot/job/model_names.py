"""The model zoo's names and default depths, importable without torch (pickers and --help use them)."""

from __future__ import annotations

ZOO = ("small_cnn", "large_dense", "rnn", "mlp", "wide_cnn")
DEFAULT_LAYERS = {"small_cnn": 3, "large_dense": 4, "rnn": 2, "mlp": 2, "wide_cnn": 4}
