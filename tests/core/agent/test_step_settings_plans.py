"""Which layouts and precisions each plan is weighed in, and what the trace says about them."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from trainpilot.agent.step_settings import (
    payback_line,
    settings_reasons,
    with_step_settings,
)
from trainpilot.machine.precision_support import native_precision
from trainpilot.plans import CHANNELS_LAST, COMPILED, Availability, Plan, PlanPrediction

CONV = SimpleNamespace(extra={"channels_last_applies": True})
DENSE = SimpleNamespace(extra={"channels_last_applies": False})
AVX2 = frozenset({"avx", "avx2", "fma"})
SAPPHIRE = frozenset({"avx2", "avx512f", "avx512_bf16", "amx_bf16", "amx_fp16"})


def _cands():
    return [(Plan("cpu", threads=1), Availability(True)), (Plan("cpu", threads=2), Availability(True)),
            (Plan("cuda"), Availability(False, "no CUDA here"))]


def test_a_convolutional_job_gets_both_layouts_a_dense_one_only_the_default():
    conv = [p for p, _ in with_step_settings(_cands(), CONV)]
    assert Plan("cpu", threads=2, memory_format=CHANNELS_LAST) in conv and Plan("cpu", threads=2) in conv
    assert Plan("cuda") in conv and len(conv) == 5  # an unavailable backend stays one line
    dense = [p for p, _ in with_step_settings(_cands(), DENSE)]
    assert all(p.memory_format is None for p in dense) and len(dense) == 3
    only_cl = [p for p, _ in with_step_settings(_cands(), CONV, memory_format="channels_last")]
    assert [p.memory_format for p in only_cl[:2]] == [CHANNELS_LAST, CHANNELS_LAST]


def test_mixed_precision_on_a_cpu_without_it_is_excluded_once_with_the_reason():
    def avx2(plan, precision):
        return native_precision(plan, precision, flags=AVX2)

    out = with_step_settings(_cands(), CONV, precision="auto", native=avx2)
    excluded = [(p, a) for p, a in out if not a and p.backend == "cpu"]
    assert [p.precision for p, _ in excluded] == ["bf16", "fp16"]  # once per backend, not per thread count
    assert excluded[0][1].reason.startswith("this CPU has no native bf16 (")
    assert all(p.precision is None for p, a in out if a)


def test_mixed_precision_where_the_cpu_has_it_is_weighed_beside_fp32():
    def sapphire(plan, precision):
        return native_precision(plan, precision, flags=SAPPHIRE)

    out = [p for p, a in with_step_settings(_cands(), CONV, precision="auto", native=sapphire) if a]
    assert Plan("cpu", threads=2, memory_format=CHANNELS_LAST, precision="bf16") in out
    assert Plan("cpu", threads=1, precision="fp16") in out and Plan("cpu", threads=1) in out
    asked = [p for p, a in with_step_settings(_cands(), DENSE, precision="bf16", native=sapphire) if a]
    assert asked == [Plan("cpu", threads=1, precision="bf16"), Plan("cpu", threads=2, precision="bf16")]


def test_a_split_is_never_offered_fp16_it_could_not_scale():
    def sapphire(plan, precision):
        return native_precision(plan, precision, flags=SAPPHIRE)

    split = Plan.split([Plan("cpu", threads=1), Plan("cpu", threads=1)])
    out = with_step_settings([(split, Availability(True))], DENSE, precision="fp16", native=sapphire)
    assert len(out) == 1 and not out[0][1] and "loss scaler" in out[0][1].reason
    bf16 = with_step_settings([(split, Availability(True))], DENSE, precision="bf16", native=sapphire)
    assert [a.available for _p, a in bf16] == [True]


def test_a_failed_probe_excludes_the_variants_and_keeps_the_default():
    failed = SimpleNamespace(extra={"channels_last_applies": True, "settings_error": "RuntimeError: no kernel"})
    out = with_step_settings(_cands()[:1], failed)
    assert [(p.memory_format, bool(a)) for p, a in out] == [(None, True), (CHANNELS_LAST, False)]
    assert "its probe step failed: RuntimeError: no kernel" in out[1][1].reason


def test_the_trace_says_what_the_layout_was_worth_and_when_compiling_pays():
    eager = Plan("cpu", threads=2)
    cl = eager.with_settings(CHANNELS_LAST)
    compiled = Plan("cpu", threads=2, mode=COMPILED, memory_format=CHANNELS_LAST)
    preds = [
        PlanPrediction(eager, 14.0, detail={"per_epoch_s": 4.5}),
        PlanPrediction(cl, 10.0, detail={"per_epoch_s": 3.2}),
        PlanPrediction(compiled, 12.0, detail={"per_epoch_s": 2.2, "breakdown_s": {"compile": 5.0}}),
    ]
    lines = settings_reasons(cl, preds, epochs=3)
    assert lines[0] == "channels_last: predicted 1.40x faster for this model at 2 thread(s)"
    assert lines[1].startswith("compiled: pays after 5.0 epochs") and "does not pay within this run of 3" in lines[1]
    slower = [PlanPrediction(eager, 10.0), PlanPrediction(cl, 14.0)]  # a model channels_last slows down
    assert settings_reasons(eager, slower, 3) == ["contiguous: channels_last predicted 0.71x here (at 2 thread(s))"]
    assert payback_line(compiled, preds, epochs=6).endswith("pays within this run of 6")


@pytest.mark.parametrize("precision,expect", [("fp32", True), ("bf16", False)])
def test_the_neural_engine_trains_in_fp32_only(precision, expect):
    ane = native_precision(Plan("ane"), precision)
    assert bool(ane) is expect
