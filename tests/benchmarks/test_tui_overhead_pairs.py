"""benchmarks/tui_overhead.py's pairing: runs alternate headless-first and app-first (ABBA), and a
model whose ratio's 90 % interval still holds the target gets more pairs, two at a time, up to
--max-repeats. The runs themselves are scripted here (a real run is a fresh process of seconds);
the benchmark's figures come from a full run (docs/measurements.md)."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"


@pytest.fixture
def bench(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCH))
    import tui_overhead

    yield tui_overhead
    sys.modules.pop("tui_overhead", None)


def scripted(bench, monkeypatch, app_times):
    """run_child stand-in: headless always trains 1.0 s, the app run k trains app_times[k]."""
    calls: list[str] = []
    app = iter(app_times)

    def run_child(mode, args, model, threads, epochs=None):
        calls.append(mode)
        return {"plan": {"backend": "cpu", "threads": 2}, "train_s": 1.0 if mode == "headless" else next(app), "ui_cores": 0.02}

    monkeypatch.setattr(bench, "run_child", run_child)
    monkeypatch.setattr(bench, "epochs_for", lambda args, model, threads: 4)
    monkeypatch.setattr(bench, "label", lambda plan: "cpu (2 threads)")
    return calls


def test_a_clear_ratio_stops_at_the_pairs_asked_for_in_abba_order(bench, monkeypatch):
    calls = scripted(bench, monkeypatch, [1.01, 1.02, 1.00, 1.01] * 4)
    args = bench.parse_args(["--repeats", "4", "--max-repeats", "16"])
    out = bench.measure(args, "mlp", None)
    assert calls == ["headless", "tui", "tui", "headless"] * 2
    assert len(out["pairs"]) == 4 and out["ratio"] == pytest.approx(1.01, abs=0.006)
    low, high = out["interval"]
    assert high < bench.TARGET and not bench.undecided(out["pairs"])


def test_an_undecided_ratio_gets_more_pairs_two_at_a_time_up_to_the_limit(bench, monkeypatch):
    logged: list[str] = []
    # the app run either side of the target, so the interval holds it however many pairs come
    calls = scripted(bench, monkeypatch, [0.95, 1.15] * 20)
    args = bench.parse_args(["--repeats", "4", "--max-repeats", "10"])
    out = bench.measure(args, "wide_cnn", None, logged.append)
    assert len(out["pairs"]) == 10 and len(calls) == 20
    assert calls[8:12] == ["headless", "tui", "tui", "headless"]  # the added pairs keep the ABBA order
    assert bench.undecided(out["pairs"])
    assert len(logged) == 1 and "holds 1.05: more pairs (at most 10)" in logged[0]


def test_max_repeats_zero_keeps_exactly_the_pairs_asked_for(bench, monkeypatch):
    scripted(bench, monkeypatch, [0.95, 1.15] * 20)
    args = bench.parse_args(["--repeats", "3", "--max-repeats", "0"])
    assert len(bench.measure(args, "rnn", None)["pairs"]) == 3
