import pytest
from typer.testing import CliRunner

from trainpilot_tui.cli import app


@pytest.fixture(scope="session")
def ddp_dataset(tmp_path_factory):
    """300 demo samples: 270 train -> 5 steps of 64 per epoch (the last one short: 14 samples)."""
    directory = tmp_path_factory.mktemp("ddp-data")
    result = CliRunner().invoke(app, ["headless", "make-dataset", str(directory), "--samples", "300"])
    assert result.exit_code == 0, result.output
    return directory
