"""`trainpilot headless compress`: bad input is one `error:` line with exit 2 (usage) or 1, and
nothing is written; a run that does not deploy still prints its JSON and exits 1."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from trainpilot_tui.cli import app

runner = CliRunner()


@pytest.fixture(scope="module")
def small_dir(tmp_path_factory):
    directory = tmp_path_factory.mktemp("tiny")
    assert runner.invoke(app, ["headless", "make-dataset", str(directory), "--samples", "60"]).exit_code == 0
    return directory


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    directory = tmp_path_factory.mktemp("data")
    assert runner.invoke(app, ["headless", "make-dataset", str(directory), "--samples", "400"]).exit_code == 0
    return directory


def _error_line(result) -> str:  # type: ignore[no-untyped-def]
    lines = [l for l in result.stderr.splitlines() if l.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert "Traceback" not in result.output
    return lines[0]


@pytest.mark.parametrize("args, code, words", [
    (["--target-speedup", "1"], 2, "--target-speedup must be above 1"),
    (["--target-speedup", "0.5"], 2, "--target-speedup must be above 1"),
    (["--max-accuracy-drop", "-1"], 2, "--max-accuracy-drop must be 0 or more"),
    (["--episodes", "0"], 2, "--episodes must be at least 1"),
    (["--deploy-rule", "lucky"], 2, "--deploy-rule must be one of point, confident"),
    (["--hardware", "pdp-11"], 1, "no hardware profile named 'pdp-11'"),
    (["--model", "rnn"], 1, "recurrent layers (LSTM)"),
])
def test_bad_input_is_one_line(args, code, words, data_dir, tmp_path: Path) -> None:
    out = tmp_path / "out"
    result = runner.invoke(app, ["headless", "compress", "-d", str(data_dir), "--threads", "1", "--out", str(out), *args])
    assert result.exit_code == code, result.output
    assert words in _error_line(result)
    assert not out.exists() and result.stdout == ""


def test_a_dataset_too_small_to_hold_out(small_dir, tmp_path: Path) -> None:
    result = runner.invoke(app, ["headless", "compress", "-d", str(small_dir), "--threads", "1", "--out", str(tmp_path / "o")])
    assert result.exit_code == 1
    assert "too small to hold out: 60 samples give 9 validation and 9 test samples" in _error_line(result)
    assert not (tmp_path / "o").exists()


def test_not_deployed_prints_json_and_exits_1(data_dir, tmp_path: Path) -> None:
    out = tmp_path / "out"
    result = runner.invoke(app, ["headless", "compress", "-d", str(data_dir), "--threads", "1", "--episodes", "2", "--dense-epochs", "1",
                                 "--finetune-steps", "2", "--deploy-epochs", "0.5",
                                 "--target-speedup", "50", "--no-baseline-finalists", "--out", str(out), "--json", "-q"])
    assert result.exit_code == 1, result.output
    data = json.loads(result.stdout)
    for key in ("layers", "step_time_dense_s", "step_time_pruned_s", "speedup_measured", "accuracy_dense", "accuracy_pruned",
                "accuracy_drop", "accuracy_drop_low", "accuracy_drop_high", "accuracy_drop_within_limit", "test_samples_lost",
                "test_samples_gained", "resolution", "deploy_rule", "chosen_kind", "deployed", "predicted", "reason", "target",
                "speedup_low", "speedup_high", "speedup_rounds", "speedup_clears_target", "speed_aim", "saved_not_deployed"):
        assert key in data, key
    assert data["accuracy_drop_low"] <= data["accuracy_drop"] <= data["accuracy_drop_high"] and data["deploy_rule"] == "point"
    assert data["deployed"] is False and data["target"]["cycles"] == "measured"
    assert set(data["predicted"]) == {"apple-m2", "linux-cuda-rtx4090"}
    assert all(p["label"] == "predicted" for p in data["predicted"].values())
    assert all("sparsity" in l and "kept_channels" in l for l in data["layers"])
    assert data["speedup_low"] <= data["speedup_measured"] <= data["speedup_high"] and data["speedup_rounds"] >= 21
    line = _error_line(result)
    # how far from the target and how sure, and where the best model found was saved instead
    assert "95% interval" in line and "0% sure it clears 50x) is below the target 50x" in line and "% short)" in line
    assert not out.exists() and line.endswith(f"the best model found is saved in {tmp_path / 'out-not-deployed'}")
    assert set(data["saved_not_deployed"]) == {"state_dict", "plan"} and (tmp_path / "out-not-deployed" / "model.pt").exists()


def test_progress_says_the_split_is_too_small_before_searching_and_the_drop_with_its_interval(data_dir, tmp_path: Path) -> None:
    result = runner.invoke(app, ["headless", "compress", "-d", str(data_dir), "--threads", "1", "--episodes", "2", "--dense-epochs", "1",
                                 "--finetune-steps", "2", "--deploy-epochs", "0.5", "--search-seconds", "0", "--finalists", "1",
                                 "--no-baseline-finalists", "--target-speedup", "1.05", "--max-accuracy-drop", "1",
                                 "--deploy-rule", "confident", "--out", str(tmp_path / "out")])
    flat = " ".join(result.stderr.split())  # progress lines wrap at the console's width
    assert flat.index("too small to resolve a 1-point drop: on 60 test samples") < flat.index("episode")
    tested = flat[flat.index("tested agent: test"):]
    assert tested.index("95% interval") < tested.index("gained of 60)") < tested.index("error:")
    # the aim past the noise before the search, every episode's speed-up with its interval, the deployed model's
    assert flat.index("aim aiming at") < flat.index("episode 1/2") and "times" in flat and "the dense model against itself" in flat
    assert flat[flat.index("episode 1/2"):].split("validation")[0].count("[") == 1
    measured = flat[flat.index("measured agent: measured speed-up"):]
    assert "95% interval" in measured.split("error:")[0] and "sure it clears 1.05x" in measured
    # 60 samples cannot bring a drop's upper end under 1 point: the confident rule never deploys here
    assert result.exit_code == 1 and not (tmp_path / "out").exists()
    assert "95% interval" in flat[flat.index("error:"):]
    summary = " ".join(result.stdout.split())
    assert "paired interval" in summary and "(deployment rule: confident)" in summary
