"""A short real search end to end: dense training, TD3 episodes, deployment and export — and the
deployment controller refusing when a threshold fails."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from trainpilot.compress import CompressConfig, run_compression
from trainpilot.compress import events as ev
from trainpilot.compress.deploy import Tuned, export, judge, load_exported, plan_document
from trainpilot.compress.job import split_three
from trainpilot.errors import ConfigError, DatasetError
from trainpilot.job.data import demo_dataset

QUICK = dict(episodes=4, search_seconds=0.0, threads=1, batch_size=32, dense_epochs=3, finetune_steps=4, deploy_epochs=2,
             search_repeats=3, deploy_repeats=5, predict_on=("apple-m2",))


def test_a_short_search_reaches_a_small_target(demo_small) -> None:
    seen: list[object] = []
    report = run_compression(CompressConfig(model="small_cnn", dataset=demo_small, target_speedup=1.15, max_accuracy_drop=15.0,
                                            export=False, **QUICK), on_event=seen.append)
    data = report.to_dict()
    assert [type(e).__name__ for e in seen if isinstance(e, ev.EpisodeEvaluated)] == ["EpisodeEvaluated"] * 4
    assert isinstance(seen[-1], ev.CompressionFinished) and seen[-1].report is report
    assert data["search"]["episodes"] == 4 and len(data["search"]["evaluations"]) == 4
    tuned = [f for f in report.finalists if f.val_accuracy is not None]
    # every configuration fine-tuned once (a search configuration may give two: grown, and grown from the channel grid)
    assert len(tuned) >= 1 and len({tuple(f.kept.values()) for f in tuned}) == len(tuned)
    chosen = max(tuned, key=lambda f: (-f.val_loss, f.val_accuracy))  # on validation
    assert report.chosen is chosen.evaluation and report.tuned.pruned is chosen.pruned
    assert len(data["search"]["finalists"]) == len(report.finalists)
    assert report.chosen is not None and report.chosen.reward.speed_met and report.chosen.cycles == "measured"
    assert data["step_time_label"] == "measured" and data["speedup_measured"] > 1.0  # re-measured: noise may move it
    assert data["params_pruned"] < data["params_dense"] and data["accuracy_split"] == "test"
    assert data["training"]["why"] == "3 epochs, as given" and data["training"]["deploy_epochs"] == pytest.approx(2, abs=0.1)
    assert data["predicted"]["apple-m2"]["label"] == "predicted"
    assert {l["name"] for l in data["layers"]} == {"features.0", "features.3"}
    assert any(l["kept_channels"] < l["out_channels"] for l in data["layers"])
    if not data["deployed"]:  # only a re-measurement below the target may refuse it here (drop allowed: 15 points)
        assert "speed-up" in data["reason"] and "accuracy" not in data["reason"]


def test_the_export_is_atomic_and_rebuilds_the_pruned_model(evaluator, tmp_path: Path) -> None:
    pruned = evaluator.prune({"features.0": 0.25, "features.3": 0.5})
    tuned = Tuned(pruned, 0.9)
    document = plan_document("small_cnn", (1, 28, 28), 10, tuned, {"speedup_measured": 1.7})
    out = tmp_path / "export"
    written = export(out, tuned, document, (1, 28, 28), mlpackage=True)
    assert sorted(p.name for p in out.iterdir()) == ["model.mlpackage", "model.pt", "plan.json"]
    assert set(written) == {"state_dict", "plan", "mlpackage"} and sorted(p.name for p in tmp_path.iterdir()) == ["export"]
    assert json.loads((out / "plan.json").read_text())["layers"]["features.3"]["kept_channels"] == 16
    model = load_exported(out)
    x = torch.randn(2, 1, 28, 28)
    assert torch.allclose(model(x), pruned.model.eval()(x), atol=1e-5)
    with pytest.raises(ConfigError, match="already exists"):
        export(out, tuned, document, (1, 28, 28), mlpackage=False)


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


def test_a_search_with_time_left_runs_past_its_episodes(demo_small) -> None:
    report = run_compression(CompressConfig(model="small_cnn", dataset=demo_small, target_speedup=1.15, max_accuracy_drop=15.0,
                                            export=False, **{**QUICK, "episodes": 2, "search_seconds": 600.0}))
    assert len(report.evaluations) == 8  # search.MAX_EPISODES_FACTOR x 2: the time is not spent, the cap ends it
