"""A short real search end to end: dense training, TD3 episodes, deployment and export — and the
deployment controller refusing when a threshold fails."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from trainpilot.compress import CompressConfig, run_compression
from trainpilot.compress import events as ev
from trainpilot.compress.deploy import Tuned, judge, load_exported
from trainpilot.compress.job import split_three
from trainpilot.errors import ConfigError, DatasetError
from trainpilot.data import demo_dataset

QUICK = dict(episodes=4, threads=1, batch_size=32, dense_epochs=3, finetune_steps=4, deploy_epochs=2,
             search_repeats=3, deploy_repeats=5, predict_on=("apple-m2",))


def test_a_short_search_reaches_a_small_target_and_exports(demo_small, tmp_path: Path) -> None:
    seen: list[object] = []
    out = tmp_path / "export"
    report = run_compression(CompressConfig(model="small_cnn", dataset=demo_small, target_speedup=1.15, max_accuracy_drop=15.0,
                                            out=str(out), **QUICK), on_event=seen.append)
    data = report.to_dict()
    assert [type(e).__name__ for e in seen if isinstance(e, ev.EpisodeEvaluated)] == ["EpisodeEvaluated"] * 4
    assert isinstance(seen[-1], ev.CompressionFinished) and seen[-1].report is report
    assert data["search"]["episodes"] == 4 and len(data["search"]["evaluations"]) == 4
    assert data["deployed"], data["reason"]
    assert data["speedup_measured"] >= 1.15 and data["step_time_label"] == "measured"
    assert data["accuracy_drop"] <= 15.0 and data["params_pruned"] < data["params_dense"]
    assert data["predicted"]["apple-m2"]["label"] == "predicted"
    assert {l["name"] for l in data["layers"]} == {"features.0", "features.3"}
    assert any(l["kept_channels"] < l["out_channels"] for l in data["layers"])
    assert sorted(p.name for p in out.iterdir()) == ["model.pt", "plan.json"]  # this machine is not Apple: no .mlpackage
    plan = json.loads((out / "plan.json").read_text())
    assert plan["layers"]["features.3"]["kept_channels"] == next(l["kept_channels"] for l in data["layers"] if l["name"] == "features.3")
    model = load_exported(out)
    x = torch.randn(2, 1, 28, 28)
    assert torch.allclose(model(x), report.tuned.pruned.model.eval()(x), atol=1e-5)


def test_deployment_is_refused_when_the_speed_target_is_missed(demo_small, tmp_path: Path) -> None:
    out = tmp_path / "never"
    report = run_compression(CompressConfig(model="small_cnn", dataset=demo_small, target_speedup=40.0, max_accuracy_drop=100.0,
                                            out=str(out), **{**QUICK, "episodes": 2}))
    assert not report.deployed and "below the target 40x" in report.verdict.reason
    assert report.to_dict()["exported"] == {} and not out.exists() and not list(tmp_path.iterdir())


def test_judge_refuses_an_accuracy_drop_above_the_maximum(trained_cnn) -> None:
    tuned = Tuned(pruned=None, accuracy=0.90)  # type: ignore[arg-type]
    verdict = judge(0.93, tuned, 2.0, "measured", max_drop=1.0, target_speedup=1.5)
    assert not verdict.deployed and "accuracy drops 3.00 points (allowed 1)" in verdict.reason
    assert judge(0.905, tuned, 2.0, "measured", max_drop=1.0, target_speedup=1.5).deployed


def test_a_dataset_too_small_to_hold_out_is_refused() -> None:
    with pytest.raises(DatasetError, match="too small to hold out"):
        split_three(demo_dataset(100, seed=1), 0)


def test_impossible_targets_and_unknown_hardware_are_refused(demo_small) -> None:
    with pytest.raises(ValueError, match="above 1"):
        run_compression(CompressConfig(dataset=demo_small, target_speedup=1.0))
    with pytest.raises(ValueError, match="0 or more"):
        run_compression(CompressConfig(dataset=demo_small, max_accuracy_drop=-0.5))
    with pytest.raises(ConfigError, match="no hardware profile named 'pdp-11'"):
        run_compression(CompressConfig(dataset=demo_small, hardware="pdp-11"))
