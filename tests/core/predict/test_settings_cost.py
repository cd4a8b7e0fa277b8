"""What a layout or precision is predicted to do to a job's step: its own probe first, calibration
where there is no probe."""
from __future__ import annotations

from dataclasses import replace

import pytest

from trainpilot.plans import CHANNELS_LAST, Plan
from trainpilot.predict.calibration import Calibration, PlanCalibration, StateRates
from trainpilot.predict.features import WorkFeatures, features_of
from trainpilot.predict.roofline import estimate
from trainpilot.predict.settings_cost import probed_ratio, settings_ratio


def _features(**kw) -> WorkFeatures:
    base = WorkFeatures(
        flops_by_kind={"conv": 2e6, "dense": 1e5, "recurrent": 0.0}, forward_flops=7e5, layers=4, recurrent_steps=0,
        activation_bytes=4e4, weight_bytes=4e5, params=1e5, batch_size=64, samples=640, steps=10, epochs=2,
    )
    return replace(base, **kw)


def _calibration(settings=None) -> Calibration:
    rates = StateRates(coef={"step": 1e-3, "layer": 1e-4, "conv": 1e-9, "dense": 1e-9}, fit_error=0.1)
    plans = {f"cpu:{t}": PlanCalibration(Plan("cpu", threads=t), rates) for t in (1, 2)}
    return Calibration("m", 2, plans, settings=settings or {})


def test_the_probe_interpolates_in_log2_of_the_threads():
    feats = _features(settings_ratios={"channels_last": {1: 0.6, 4: 1.2}})
    assert probed_ratio(feats, "channels_last", 1) == pytest.approx(0.6)
    assert probed_ratio(feats, "channels_last", 2) == pytest.approx(0.9)
    assert probed_ratio(feats, "channels_last", 8) == pytest.approx(1.2)
    assert probed_ratio(feats, "bf16", 2) is None


def test_a_plan_in_channels_last_is_its_default_twin_scaled_by_the_jobs_probe():
    cal = _calibration()
    feats = _features(settings_ratios={"channels_last": {1: 0.5, 2: 0.8}})
    plain = estimate(feats, Plan("cpu", threads=2), 0.0, cal)
    cl = estimate(feats, Plan("cpu", threads=2, memory_format=CHANNELS_LAST), 0.0, cal)
    assert cl.run_s == pytest.approx(0.8 * plain.run_s)
    assert "probed at 1.25x" in cl.note


def test_without_a_probe_calibrations_conv_ratio_scales_the_conv_flops_only():
    cal = _calibration({"cpu:2": {"channels_last": {"conv": 0.5}}})
    feats = _features()
    plain = estimate(feats, Plan("cpu", threads=2), 0.0, cal)
    cl = estimate(feats, Plan("cpu", threads=2, memory_format=CHANNELS_LAST), 0.0, cal)
    conv_s = feats.samples * feats.flops_by_kind["conv"] * 1e-9  # an epoch's conv FLOPs, in seconds
    assert plain.per_epoch_s - cl.per_epoch_s == pytest.approx(0.5 * conv_s)
    ratio, why = settings_ratio(feats, Plan("cpu", threads=2, memory_format=CHANNELS_LAST), cal)
    assert 0.5 < ratio < 1.0 and "calibrated" in why


def test_a_setting_nothing_measured_has_no_estimate():
    assert estimate(_features(), Plan("cpu", threads=2, precision="bf16"), 0.0, _calibration()) is None


def test_the_probe_reaches_the_features_from_the_profiles_json_form():
    feats = features_of({"extra": {"settings_probe": {"1": {"channels_last": 0.7}, "2": {"channels_last": 1.1}}}})
    assert feats.settings_ratios == {"channels_last": {1: 0.7, 2: 1.1}}
