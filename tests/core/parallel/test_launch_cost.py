"""The launch overhead a 2-rank prediction adds: learned from real --nproc launches (launch_cost.py),
and the ranks' speed probe that sets their shares (speed.py)."""
from __future__ import annotations

import time

import torch
from torch import nn

from trainpilot.parallel import launch_cost
from trainpilot.parallel.rank_speed import time_per_sample
from trainpilot.parallel.link import Link


def test_before_any_launch_the_loopback_figure_is_used_and_said(tmp_path):
    got = launch_cost.launch_overhead(2, 1.6, tmp_path)
    assert got.seconds == 1.6 and "no launch recorded" in got.source


def test_recorded_launches_give_their_median_per_rank_count(tmp_path):
    for s in (6.0, 9.0, 7.0):
        launch_cost.record_launch(2, s, tmp_path)
    launch_cost.record_launch(3, 20.0, tmp_path)
    got = launch_cost.launch_overhead(2, 1.6, tmp_path)
    assert got.seconds == 7.0 and got.source == "median of 3 measured --nproc 2 launch(es)"
    assert launch_cost.launch_overhead(3, 1.6, tmp_path).seconds == 20.0


def test_only_recent_launches_are_kept_and_bad_figures_are_not_recorded(tmp_path):
    for s in range(launch_cost.KEEP + 4):
        launch_cost.record_launch(2, float(s), tmp_path)
    launch_cost.record_launch(2, -1.0, tmp_path)
    launch_cost.record_launch(2, float("nan"), tmp_path)
    kept = launch_cost._load(launch_cost._path(tmp_path))["2"]
    assert kept == [float(s) for s in range(4, launch_cost.KEEP + 4)]


def test_a_damaged_file_starts_learning_again(tmp_path):
    path = launch_cost._path(tmp_path)
    path.parent.mkdir(parents=True)
    path.write_text("{not json")
    assert launch_cost.launch_overhead(2, 1.0, tmp_path).seconds == 1.0
    launch_cost.record_launch(2, 5.0, tmp_path)
    assert launch_cost.launch_overhead(2, 1.0, tmp_path).seconds == 5.0


def test_the_link_keeps_its_bandwidth_and_takes_the_launch_start_up(tmp_path):
    link = Link(1e9, 1e-4, "measured: loopback", startup_s=1.6)
    launch_cost.record_launch(2, 8.5, tmp_path)
    got = launch_cost.with_launch_startup(link, 2, tmp_path)
    assert (got.bandwidth_bytes_per_s, got.latency_s, got.startup_s) == (1e9, 1e-4, 8.5)
    assert "median of 1 measured --nproc 2" in got.source


def test_a_launch_is_recorded_without_its_job_and_a_prediction_adds_the_planned_job(tmp_path):
    result = {"actual_s": 2.0, "prepare_s": 1.5, "distributed": {"world_size": 2}}
    launch_cost.learn_from_launch(2, 7.5, result, tmp_path)
    assert result["distributed"]["launch_s"] == 7.5
    assert launch_cost.launch_overhead(2, 1.0, tmp_path).seconds == 4.0  # 7.5 - 2.0 trained - 1.5 prepared
    heavier = launch_cost.launch_overhead(2, 1.0, tmp_path, prepare_s=3.0)
    assert heavier.seconds == 7.0 and heavier.prepare_s == 3.0 and "+ 3.0 s preparing the job" in heavier.source


def test_a_failed_launch_teaches_nothing(tmp_path):
    launch_cost.learn_from_launch(2, 7.5, None, tmp_path)
    launch_cost.learn_from_launch(2, 7.5, {"status": "failed"}, tmp_path)
    assert "no launch recorded" in launch_cost.launch_overhead(2, 1.0, tmp_path).source


class _StretchedOnce(nn.Module):
    """A pass stretched once by something else on the core (as an unpinned process landing there)."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 2)
        self.calls = 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        time.sleep(0.5 if self.calls == 3 else 0.02)
        return self.lin(x)


def test_the_speed_probe_ignores_a_single_stretched_pass():
    x, y = torch.randn(10, 4), torch.zeros(10, dtype=torch.long)
    per_sample = time_per_sample(_StretchedOnce(), x, y, torch.device("cpu"))
    assert 0.015 / 10 < per_sample < 0.05 / 10  # the mean would be ~0.05 s per pass or more
