"""Every test gets its own TRAINPILOT_HOME, so no test reads or writes the user's history, and
first-sight calibration is off (tests that exercise it switch it back on)."""
from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def trainpilot_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch):
    home = tmp_path_factory.mktemp("tp-home")
    monkeypatch.setenv("TRAINPILOT_HOME", str(home))
    monkeypatch.setenv("TRAINPILOT_AUTO_CALIBRATE", "0")
    return home


@pytest.fixture
def threads_kept():
    """A test whose code sets torch's threads in this process (choose() does): the others get theirs back."""
    import torch

    before = torch.get_num_threads()
    yield
    torch.set_num_threads(before)
