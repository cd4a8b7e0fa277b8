"""benchmarks/adapt.py: its three parts run end to end on a tiny configuration and print their
tables and a verdict per target (the figures come from a run alone on a quiet machine:
docs/measurements.md); and its verdicts follow from the runs' figures as the targets say."""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"


@pytest.fixture
def bench(monkeypatch, tmp_path):
    monkeypatch.syspath_prepend(str(BENCH))
    monkeypatch.setenv("TRAINPILOT_HOME", str(tmp_path))  # main() sets its own; this puts it back after
    monkeypatch.setenv("TRAINPILOT_AUTO_CALIBRATE", "0")  # calibrating takes ~30 s; the rule cascade predicts
    import adapt

    yield adapt
    for name in ("adapt", "overhead"):
        sys.modules.pop(name, None)


def test_every_part_runs_end_to_end_and_prints_a_verdict_per_target(bench, monkeypatch, capsys):
    monkeypatch.setitem(
        bench.JOBS, "wide_mlp", lambda: bench.wide_mlp_job(samples=192, width=64)
    )  # 3 small steps an epoch
    argv = [
        "--jobs",
        "wide_mlp",
        "--epochs",
        "3",
        "--quiet-models",
        "mlp",
        "--quiet-runs",
        "1",
        "--quiet-seconds",
        "0.1",
        "--overhead-model",
        "mlp",
        "--overhead-samples",
        "200",
        "--overhead-epochs",
        "2",
        "--overhead-repeats",
        "1",
    ]
    assert bench.main(argv) == 0
    out = capsys.readouterr().out
    for heading in ("== load:", "the plans it predicts per epoch", "== quiet:", "== overhead:", "== targets =="):
        assert heading in out, out
    # every variant of both schedules has its row: the adaptive run, the static agent, each static plan
    rows = [line.split() for line in out.splitlines() if line.startswith("wide_mlp  ")]
    for schedule in ("A", "B"):
        assert {" ".join(r[2:4]) for r in rows if r[1] == schedule} >= {"adaptive cpu", "static agent", "cpu (1"}
    targets = out.split("== targets ==")[1]
    for target in (
        "loaded step rate adaptive / static agent >= 2.0x",
        "whole run static agent / adaptive >= 1.2x",
        "adaptive / per-phase oracle <= 1.10",
        "each load change answered by a move within 3 s",
        "moves with trigger load or pace, no load started = 0",
        "moves with trigger verify",
        "epoch adapt on / bare loop <= 1.05",
    ):
        assert target in targets, targets
    verdict_lines = [line for line in targets.splitlines()[3:] if line.strip() and not line.startswith("benchmarks/")]
    assert len(verdict_lines) == 2 * 4 + 2 + 1
    assert all(line.rstrip().endswith(("met", "MISSED", "not judged", "reported")) for line in verdict_lines), targets


def run(bench, schedule, variant, times, *, moves=(), changes=()):
    """A finished run with these epoch times (1 step each)."""
    r = bench.Run("job", schedule, variant, first_plan="cpu (2 threads)")
    r.epochs = [(e + 1, t, 1) for e, t in enumerate(times)]
    r.steps_by_plan = Counter({"cpu (2 threads)": len(times)})
    r.moves = [bench.Move(at, trigger, "cpu (1 thread)", 1) for at, trigger in moves]
    r.changes = list(changes)
    return r


def test_the_verdicts_follow_from_the_phases_and_the_moves(bench, capsys):
    a = bench.Schedule("A", 1, 2)  # epoch 2 of 3 loaded
    assert [a.loaded(e) for e in (1, 2, 3)] == [False, True, False]
    runs = [
        run(
            bench,
            a,
            bench.ADAPTIVE,
            [1.0, 1.2, 1.0],
            moves=[(2.5, "load"), (5.0, "verify"), (9.0, "load")],
            changes=[("on", 1.0), ("off", 8.0)],
        ),
        run(bench, a, bench.STATIC_AGENT, [1.0, 3.0, 1.0]),
        run(bench, a, "cpu (1 thread)", [1.8, 1.1, 1.8]),
        run(bench, a, "cpu (2 threads)", [1.0, 3.0, 1.0]),
    ]
    assert runs[0].latencies() == [("on", 1.5), ("off", 1.0)]  # the first load/pace move after each change
    verdicts = {v[0]: v for v in bench.report_load(runs, ["job"])}
    assert verdicts["loaded step rate adaptive / static agent >= 2.0x"][4] == "met"  # 3.0 / 1.2 s
    assert verdicts["whole run static agent / adaptive >= 1.2x"][4] == "met"  # 5.0 / 3.2 s
    oracle = verdicts["adaptive / per-phase oracle <= 1.10"]  # 2.0 unloaded (2 threads) + 1.1 loaded (1 thread)
    assert oracle[3].startswith("1.032 (3.2 vs 3.1 s") and oracle[4] == "met"
    assert verdicts["each load change answered by a move within 3 s"][4] == "met"
    assert "adaptive" in capsys.readouterr().out

    late = run(bench, a, bench.ADAPTIVE, [1.0, 2.9, 1.0], moves=[(5.0, "load")], changes=[("on", 1.0), ("off", 8.0)])
    verdicts = {v[0]: v for v in bench.report_load([late, *runs[1:]], ["job"])}
    assert verdicts["each load change answered by a move within 3 s"][3] == "load on: 4.0 s, load off: no move"
    assert verdicts["each load change answered by a move within 3 s"][4] == "MISSED"
    assert verdicts["adaptive / per-phase oracle <= 1.10"][4] == "MISSED"


def test_schedule_b_starts_before_the_session_and_is_answered_by_the_first_plan(bench):
    a, b = bench.schedules(12)
    assert (a.on, a.off, b.on, b.off) == (4, 8, 0, 4)
    r = run(bench, b, bench.ADAPTIVE, [1.0] * 12, moves=[(6.0, "load")], changes=[("on", -3.0), ("off", 5.0)])
    assert r.latencies() == [("off", 1.0)]
    assert r.phase(True) == (4.0, 4) and r.phase(False) == (8.0, 8)
