"""examples/huggingface_trainer.py and examples/huggingface_job.py run as a user runs them, with
`--small`: a real transformers Trainer configured by trainpilot.huggingface, and the same BERT as a
plain Job trained on the loss it returns. Both land in the history."""

from __future__ import annotations

import importlib.util
import math
import sys
from dataclasses import replace
from pathlib import Path
from types import ModuleType

import pytest

pytest.importorskip("transformers")
pytest.importorskip("accelerate")

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.fixture(autouse=True)
def calibrated_home(trainpilot_home: Path) -> Path:
    """A calibration derived from a written description of this machine (as test_examples.py does)."""
    from trainpilot.backends import probe
    from trainpilot.machine.target_profiles import TargetBackend, TargetMachine
    from trainpilot.predict.calibration import save_calibration
    from trainpilot.predict.derive import calibration_for_target

    hw = probe(include_backends=False)
    box = TargetMachine(
        "test box", "tests", ("tests",), "Linux", "x86_64", hw.logical_cpus, hw.logical_cpus, 8 * 2**30, 40e9,
        {"cpu": TargetBackend(80e9, 20e9, "fp32")},
    )  # fmt: skip
    calibration = replace(calibration_for_target(box), machine_id=hw.machine_id, described=None)
    save_calibration(calibration, trainpilot_home / "calibration")
    return trainpilot_home


@pytest.fixture(autouse=True)
def threads_kept():
    import torch

    before = torch.get_num_threads()
    yield
    torch.set_num_threads(before)


def load(name: str) -> ModuleType:
    module_name = f"trainpilot_example_{name}"
    if module_name not in sys.modules:
        spec = importlib.util.spec_from_file_location(module_name, EXAMPLES / f"{name}.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[module_name] = module
        spec.loader.exec_module(module)
    return sys.modules[module_name]


def history():
    from trainpilot.backends import probe
    from trainpilot.paths import history_db_path
    from trainpilot.predict.history import History

    return History(history_db_path()).records(probe(include_backends=False).machine_id)


def test_the_trainer_example_runs_small(tmp_path, capsys):
    metrics = load("huggingface_trainer").main(["--small"])
    out = capsys.readouterr().out
    assert "plan: cpu" in out and "status: success" in out
    assert math.isfinite(metrics["eval_loss"]) and 0.0 <= metrics["eval_accuracy"] <= 1.0
    [run] = history()
    assert run.status == "success" and run.model == "BertForSequenceClassification" and run.actual_s > 0


def test_the_job_example_runs_small(capsys):
    import trainpilot
    from trainpilot.job.job_file import load_job

    result = load("huggingface_job").main(["--small"])
    out = result.to_dict()
    assert result.status == "success", result.message
    assert math.isfinite(out["loss"]) and math.isfinite(out["val_accuracy"])
    assert "model's own loss" in out["loss_fn"]
    [run] = history()
    assert run.status == "success" and run.model == "bert-marker"
    assert isinstance(load_job(f"{EXAMPLES / 'huggingface_job'}.py:make_job"), trainpilot.Job)  # --job loads it
