"""benchmarks/compress.py --seeds N: each case's runs summarised over their seeds (the arithmetic of
the summary; the runs themselves are the benchmark's, too slow for the suite)."""
from __future__ import annotations

import argparse
from pathlib import Path
from types import SimpleNamespace

from trainpilot.compress.baselines import Row
from trainpilot.compress.drop_interval import drop_interval

BENCH = Path(__file__).resolve().parents[3] / "benchmarks"


def _run(group: str, agent: float, uniform: float, l1: float, speedup: float = 1.6) -> dict:
    def row(name: str, drop: float) -> Row:  # `drop` points on 10,000 test samples: 1 sample = 0.01 point
        changed = round(drop * 100)
        return Row(name, speedup, 0.9, drop_interval(max(changed, 0), max(-changed, 0), 10_000), {"conv": 8})

    return {"group": group, "agent": row("agent", agent), "uniform": row("uniform", uniform), "l1": row("l1-global", l1),
            "chosen_kind": "agent" if agent != uniform else "uniform"}


def test_each_case_is_summarised_over_its_seeds_against_the_better_baseline_of_each_run(capsys, monkeypatch):
    monkeypatch.syspath_prepend(str(BENCH))
    import compress

    results = [
        _run("small_cnn / demo", 0.2, 0.4, 0.1),   # above: L1 lost less
        _run("small_cnn / demo", 0.0, 0.3, 0.3),   # below both
        _run("small_cnn / demo", 0.1, 0.1, 0.5),   # level with uniform
        _run("wide_cnn / demo", -1.0, 1.0, 0.5),
        _run("wide_cnn / demo", 1.5, 1.0, 2.0, speedup=1.4),  # above, and short of the speed target
    ]
    compress._over_seeds(results, argparse.Namespace(seeds=3, target_speedup=1.5, max_drop=1.0))
    out = capsys.readouterr().out.strip().splitlines()
    assert out[0].startswith("over 3 seeds")
    assert out[1] == ("  small_cnn / demo: agent +0.10 [+0.00, +0.20], uniform +0.27 [+0.10, +0.40], L1 +0.30 [+0.10, +0.50];"
                      " agent below both 1, level 1, above 1; >= 1.5x at <= 1 pt 3/3; chosen: agent 2, uniform 1")
    assert out[2] == ("  wide_cnn / demo: agent +0.25 [-1.00, +1.50], uniform +1.00 [+1.00, +1.00], L1 +1.25 [+0.50, +2.00];"
                      " agent below both 1, level 0, above 1; >= 1.5x at <= 1 pt 1/2; chosen: agent 2")
    # small_cnn: the agent's mean +0.10 is below uniform's +0.27 and L1's +0.30; wide_cnn: +0.25 below +1.00 and +1.25
    assert out[3] == "cases whose mean drop is below both baselines' means: 2/2"


def test_a_case_level_with_a_baseline_on_average_is_not_counted_as_better(capsys, monkeypatch):
    monkeypatch.syspath_prepend(str(BENCH))
    import compress

    results = [_run("small_cnn / digits", 0.37, 0.37, 0.37), _run("small_cnn / digits", 0.0, 0.74, 0.0)]
    compress._over_seeds(results, argparse.Namespace(seeds=2, target_speedup=1.5, max_drop=1.0))
    out = capsys.readouterr().out.strip().splitlines()
    assert "agent below both 0, level 2, above 0" in out[1]
    assert out[-1] == "cases whose mean drop is below both baselines' means: 0/1"


def test_the_table_puts_each_speed_up_interval_beside_its_drop_and_the_search_beside_the_deployment(capsys, monkeypatch):
    monkeypatch.syspath_prepend(str(BENCH))
    import compress

    from trainpilot.compress.speedup_interval import speedup_interval

    def steady(ratio: float):
        return speedup_interval([1.0] * 21, [1.0 / (ratio * (0.95 + 0.005 * i)) for i in range(21)])

    run = _run("small_cnn / digits", 0.37, 0.74, 0.0)
    run.update(case="small_cnn / digits", threads=2, batch=512, dense_acc=0.98, dense_ms=6.8, agent_ms=4.4,
               agent=Row("agent", 1.55, 0.98, run["agent"].drop, {"conv": 8}, steady(1.55)),
               search_best=SimpleNamespace(speedup_text=lambda: "1.62x [1.41, 1.80]"), deploy_iv=steady(1.52),
               deploy_x=1.52, aim=1.04, pred_m2=1.6, pred_4090=1.2, search_s=40.0, deployed=True, kept={"conv": 8},
               kept_uniform={"conv": 8}, kept_l1={"conv": 8}, finalists=[], chosen_kept={"conv": 8}, test_n=270,
               resolution=None, reason="deployed")
    compress._table([run], argparse.Namespace(seeds=1, target_speedup=1.5, max_drop=1.0), 60.0)
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if line.startswith("small_cnn / digits  "))
    agent, search, deploy = steady(1.55), "1.62 [1.41, 1.80]", steady(1.52)
    assert f"{agent.ratio:.2f} [{agent.low:.2f}, {agent.high:.2f}]" in row and "+0.37 [" in row
    assert row.index(search) < row.index(f"{deploy.ratio:.2f} [{deploy.low:.2f}, {deploy.high:.2f}]")
    assert "deployed runs whose deployment measurement clears 1.5x: 1/1" in out
