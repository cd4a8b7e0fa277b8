"""benchmarks/unseen.py: its seeded draw of jobs is deterministic, each job file it writes is one a
user could pass to `--job`, its verdicts follow from the runs as the targets say, and the smallest
run goes end to end (the figures themselves come from full runs alone on the machine)."""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"


@pytest.fixture
def bench(monkeypatch, tmp_path):
    monkeypatch.syspath_prepend(str(BENCH))
    monkeypatch.setenv("TRAINPILOT_HOME", str(tmp_path / "home"))  # main() sets its own; this puts it back after
    monkeypatch.setenv("TRAINPILOT_AUTO_CALIBRATE", "0")  # calibrating takes ~10 s; the rule cascade predicts
    import unseen
    import unseen_jobs
    import unseen_report

    yield unseen, unseen_jobs, unseen_report
    for name in ("unseen", "unseen_jobs", "unseen_report", "paired"):
        sys.modules.pop(name, None)


def test_the_same_seed_draws_the_same_jobs_and_another_seed_other_ones(bench):
    _unseen, jobs, _report = bench
    first, again, other = jobs.draw_jobs(7, 12), jobs.draw_jobs(7, 12), jobs.draw_jobs(8, 12)
    assert [s.to_dict() for s in first] == [s.to_dict() for s in again]
    assert [jobs.job_source(s) for s in first] == [jobs.job_source(s) for s in again]
    assert [s.to_dict() for s in first] != [s.to_dict() for s in other]
    # job i is the same whatever the count or --quick (only its drawn duration's range differs)
    fewer = jobs.draw_jobs(7, 3, quick=True)
    assert [(s.kind, s.width, s.depth, s.batch, s.samples, s.shape) for s in fewer] == [
        (s.kind, s.width, s.depth, s.batch, s.samples, s.shape) for s in first[:3]
    ]
    assert Counter(s.kind for s in first) == {kind: 2 for kind in jobs.KINDS}
    assert sum(s.loaded for s in first) == 4 and sum(s.loaded for s in fewer) == 1
    for s in first:
        assert 8 <= s.batch <= 512 and 10.0 <= s.seconds <= 40.0 and s.samples >= 4 * s.batch
        assert 3.0 * s.batch * jobs.forward_flops(s.kind, s.width, s.depth, s.shape) <= jobs.MAX_STEP_FLOPS
        if s.loaded:
            assert 0.2 <= s.load_span <= 0.5 and 0.05 <= s.load_start and s.load_start + s.load_span <= 0.95
    assert all(3.0 <= s.seconds <= 5.0 for s in fewer)


def test_every_kind_is_a_plain_torch_job_file_the_product_loads(bench, tmp_path):
    import torch

    import trainpilot
    from trainpilot.job.job_file import load_job

    _unseen, jobs, _report = bench
    picked = {s.kind: s for s in jobs.draw_jobs(11, 12)}
    assert set(picked) == set(jobs.KINDS)
    for kind, spec in picked.items():
        path = jobs.write_job(spec, tmp_path, samples=64, epochs=2)
        text = path.read_text()
        assert "unseen_jobs" not in text and "benchmarks" not in text.split('"""')[2]  # a user's file, no helpers
        assert f"--job {spec.file_name}:make_job --epochs 2" in text
        job = load_job(f"{path}:make_job")
        assert isinstance(job, trainpilot.Job) and job.batch_size == spec.batch and job.title == spec.name
        X, y = job.data
        assert len(X) == 64
        assert X.dtype == (torch.int64 if kind == "transformer" else torch.float32)
        model = job.model()
        assert any(isinstance(m, torch.nn.BatchNorm2d) for m in model.modules()) == (kind == "cnn_bn")
        job.loss(model(X[:4]), y[:4]).backward()
        job.optimizer(model.parameters()).step()


def run(variant, rnd, seconds, *, forced=False, predicted=None, plan="cpu (1 thread)"):
    return {
        "variant": variant,
        "round": rnd,
        "actual_s": seconds,
        "forced": forced,
        "ok": True,
        "predicted_s": predicted,
        "first_plan": plan,
        "moves": [],
    }


def test_the_figures_and_verdicts_follow_from_the_runs(bench):
    _unseen, _jobs, report = bench
    A, D, ADAPT, OFF = report.AGENT, report.DEFAULT, report.ADAPTIVE, report.OFF
    fast = {
        "job": "01 mlp",
        "spec": {"loaded": True},
        "runs": [
            run(A, 0, 8.0, predicted=9.0),
            run(D, 0, 10.0, forced=True),
            run("cpu (1 thread)", 0, 7.8, forced=True),
            run(D, 1, 11.0, forced=True),
            run(A, 1, 10.0, predicted=10.5),
            run(A, 2, 9.0, predicted=9.9),
            run(D, 2, 9.0, forced=True),
            run(ADAPT, 3, 5.0),
            run(OFF, 3, 6.0),
            run(OFF, 4, 6.0),
            run(ADAPT, 4, 6.2),  # slower by 3.3 %: within the 5 %
        ],
    }
    f = report.job_figures(fast)
    assert f["agent_vs_default"]["ratios"] == [10 / 8, 11 / 10, 1.0]
    assert f["agent_vs_default"]["ratio"] == pytest.approx(1.1)
    assert f["best_plan"] == "cpu (1 thread)" and f["regret_pct"] == pytest.approx(100 * (9.0 / 7.8 - 1))
    assert f["cold_error_pct"] == pytest.approx(10.0)  # +12.5, +5, +10 %: the median
    assert f["adaptive_vs_off"]["ratios"] == [6.0 / 5.0, 6.0 / 6.2]
    slow = {
        "job": "02 cnn",
        "spec": {"loaded": False},
        "runs": [run(A, k, 12.0, predicted=6.0) for k in range(3)]
        + [run(D, k, 10.0 + 0.1 * k, forced=True) for k in range(3)],
    }
    g = report.job_figures(slow)
    assert g["agent_vs_default"]["high"] < report.INTERVAL_FLOOR and g["adaptive_vs_off"] is None
    totals, rows = report.summary([{**f, "job": "01 mlp"}, {**g, "job": "02 cnn"}])
    verdicts = {target: (measured, v) for target, measured, v in rows}
    assert totals["intervals_below_floor"] == 1 and verdicts["no job's interval wholly below 0.95x"][1] == "MISSED"
    assert "02 cnn" in verdicts["no job's interval wholly below 0.95x"][0]
    assert totals["cold_error_median_pct"] == pytest.approx(30.0)  # |+10| and |-50|
    assert totals["loaded_faster_share"] == 0.5 and totals["loaded_worst_time_ratio"] == pytest.approx(6.2 / 6.0)
    assert verdicts["loaded: adaptive never slower than off by > 5 %"][1] == "met"
    assert verdicts["loaded: adaptive faster than adapt off in >= 90% of pairs"][1] == "MISSED"
    assert report.p90(list(range(1, 13))) == 11


def test_the_budget_shrinks_every_duration_by_one_factor_never_below_the_floor(bench):
    unseen, jobs, _report = bench
    specs = jobs.draw_jobs(7, 12)
    drawn, factor, estimate = unseen.fit_budget(specs, 3, 2, 1e9, 10.0)
    assert factor == 1.0 and drawn == [s.seconds for s in specs]
    cut, factor, estimate = unseen.fit_budget(specs, 3, 2, 40 * 60.0, 10.0)
    assert factor < 1.0 and estimate <= 40 * 60.0
    assert all(c >= 10.0 and c <= s.seconds for c, s in zip(cut, specs, strict=True))
    assert unseen.rounds(3, ["x", "y", "z", "w"]) == [
        ["agent", "default", "x", "w"],
        ["y", "default", "agent"],
        ["agent", "default", "z"],
    ]


def test_the_smallest_run_goes_end_to_end_and_writes_every_run_with_its_trace(bench, tmp_path, capsys):
    unseen, _jobs, _report = bench
    argv = ["--seed", "29", "--jobs", "1", "--quick", "--pairs", "1", "--seconds", "0.3,0.3", "--loaded", "1"]
    assert unseen.main([*argv, "--dir", str(tmp_path / "out")]) == 0
    out = capsys.readouterr()
    assert "seed 29" in out.out and "estimate:" in out.out and "regression" in out.out
    targets = out.out.split("targets:")[1]
    for target in (
        "agent / default median",
        "interval wholly below",
        "regret",
        "cold prediction error, p90",
        "adaptive faster than adapt off",
        "never slower than off",
    ):
        assert target in targets, targets
    assert "[unseen 0:" in out.err and "job 1/1" in out.err
    result = json.loads((tmp_path / "out" / "unseen-seed29.json").read_text())
    job = result["jobs"][0]
    assert job["spec"]["kind"] == "regression" and Path(job["file"]).is_file()
    variants = Counter(r["variant"] for r in job["runs"])
    assert variants["agent"] == variants["default"] == variants["adaptive"] == variants["off"] == 1
    agent = next(r for r in job["runs"] if r["variant"] == "agent")
    assert any("decision:" in line for line in agent["trace"]) and agent["predicted_s"] is not None
    loaded = next(r for r in job["runs"] if r["variant"] == "adaptive")
    assert [c["load"] for c in loaded["busy_core"]] == ["on", "off"]
