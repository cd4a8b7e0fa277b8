"""Turning MLComputePlan's per-operation answers into the counts the UI shows."""
from __future__ import annotations

import pytest

from trainpilot.backends.ane.placement import OpPlacement, device_name, summarize


class MLNeuralEngineComputeDevice:  # same class names as coremltools' device classes (tests only)
    pass


class MLCPUComputeDevice:
    pass


def test_device_classes_map_to_short_names() -> None:
    assert device_name(MLNeuralEngineComputeDevice()) == "ane"
    assert device_name(MLCPUComputeDevice()) == "cpu"
    assert device_name(None) == "unknown"
    assert device_name(object()) == "unknown"


def test_counts_and_cost_shares() -> None:
    report = summarize([
        OpPlacement("const", "unknown"),  # bookkeeping, not counted
        OpPlacement("cast", "cpu", 0.01),
        OpPlacement("conv", "ane", 0.6),
        OpPlacement("relu", "ane", 0.09),
        OpPlacement("conv", "ane", 0.3),
    ])
    assert report.counts == {"cpu": 1, "ane": 3} and report.total_ops == 4
    assert report.cost_share["ane"] == pytest.approx(0.99)
    assert report.by_op["conv"] == {"ane": 2}
    assert report.ran_on_ane
    assert report.summary() == "4 ops planned by Core ML: ANE 3 (99% est. cost), CPU 1 (1% est. cost)"
    assert report.to_dict()["counts"] == {"cpu": 1, "ane": 3}


def test_without_costs_there_are_no_shares_and_cpu_only_is_not_ane() -> None:
    report = summarize([OpPlacement("linear", "cpu"), OpPlacement("softmax", "cpu")])
    assert report.cost_share == {}
    assert not report.ran_on_ane
    assert report.summary() == "2 ops planned by Core ML: CPU 2"
    assert summarize([]).summary() == "Core ML reported no operations"
