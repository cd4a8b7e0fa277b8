"""Shared pieces of the core tests."""
from __future__ import annotations

from dataclasses import replace

import pytest


@pytest.fixture
def calibrated_model(tmp_path):
    """A cost model in `tmp_path` (a TRAINPILOT_HOME) whose calibration is derived from a written
    description of this machine: deterministic, and stored as a measured one would be."""
    from trainpilot.backends import probe
    from trainpilot.predict import CostModel
    from trainpilot.predict.derive import calibration_for_target
    from trainpilot.machine.target_profiles import TargetBackend, TargetMachine

    hw = probe(include_backends=False)
    box = TargetMachine("test box", "tests", ("tests",), "Linux", "x86_64", hw.logical_cpus, hw.logical_cpus, 8 * 2**30, 40e9,
                        {"cpu": TargetBackend(80e9, 20e9, "fp32")})
    model = CostModel.open(tmp_path, hardware=hw)
    model._store(replace(calibration_for_target(box), machine_id=hw.machine_id, described=None))
    return model


@pytest.fixture
def home(tmp_path, monkeypatch, calibrated_model):
    """A TRAINPILOT_HOME with a calibration (calibrated_model stores it in tmp_path): no first-sight calibration."""
    monkeypatch.setenv("TRAINPILOT_HOME", str(tmp_path))
    return tmp_path

