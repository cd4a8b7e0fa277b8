"""Cluster files: the shipped examples load and predict; every malformed file is one ConfigError
naming the file and the key; the loopback link is measured once and cached."""
from __future__ import annotations

from pathlib import Path

import pytest

from trainpilot.errors import ConfigError
from trainpilot.parallel import link as link_mod
from trainpilot.parallel.cluster import load_cluster, plan_cluster
from trainpilot.parallel.link import ring_allreduce_s

from cost_models import idle, zoo_profile as _profile

ROOT = Path(__file__).resolve().parents[3]
CLUSTERS = ROOT / "profiles" / "clusters"
GOOD = """name = "t"
[link]
bandwidth_gb_per_s = 1.0
latency_us = 10
[[nodes]]
profile = "apple-m2"
ranks = 2
"""


def test_shipped_cluster_files_load() -> None:
    files = sorted(CLUSTERS.glob("*.toml"))
    assert len(files) >= 2
    for path in files:
        cluster = load_cluster(path)
        assert cluster.ranks >= 2 and cluster.link.bandwidth_bytes_per_s > 0


def test_two_workstations_predicted_compute_plus_allreduce() -> None:
    report = plan_cluster(load_cluster(CLUSTERS / "two-rtx4090-10gbe.toml"), _profile("small_cnn"), idle())
    assert [r["share"] for r in report["ranks"]] == [32, 32]
    link = load_cluster(CLUSTERS / "two-rtx4090-10gbe.toml").link
    assert report["allreduce_s"] == pytest.approx(ring_allreduce_s(report["gradient_bytes"], 2, link))
    assert report["step_s"] == pytest.approx(max(r["compute_s"] for r in report["ranks"]) + report["allreduce_s"])
    assert report["scaling_pays"] == (report["predicted_s"] < report["best_single"]["predicted_s"])
    assert report["verdict"].startswith("scaling out pays" if report["scaling_pays"] else "scaling out does not pay")


def test_a_slow_link_makes_scale_out_not_pay(tmp_path: Path) -> None:
    path = tmp_path / "slow.toml"
    path.write_text(GOOD.replace("bandwidth_gb_per_s = 1.0", "bandwidth_gb_per_s = 0.0001").replace("ranks = 2", "ranks = 1") + GOOD[GOOD.index("[[nodes]]"):].replace("ranks = 2", "ranks = 1"))
    report = plan_cluster(load_cluster(path), _profile("large_dense"), idle())
    assert not report["scaling_pays"] and "does not pay" in report["verdict"]


def test_several_ranks_on_one_node_share_its_cores(tmp_path: Path) -> None:
    path = tmp_path / "one.toml"
    path.write_text(GOOD)
    report = plan_cluster(load_cluster(path), _profile("small_cnn"), idle())
    assert [r["plan"]["threads"] for r in report["ranks"]] == [4, 4]  # the M2's 8 logical CPUs, 2 ranks


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (GOOD.replace('name = "t"\n', ""), "missing required key 'name'"),
        (GOOD.replace('name = "t"\n', 'name = "t"\ncolour = 1\n'), "unknown key 'colour'"),
        (GOOD + "colour = 1\n", "unknown key 'nodes[0].colour'"),
        (GOOD.replace("latency_us = 10", "latency_us = 10\nspeed = 3"), "unknown key 'link.speed'"),
        (GOOD.replace("bandwidth_gb_per_s = 1.0", "bandwidth_gb_per_s = -1.0"), "'link.bandwidth_gb_per_s' must be a positive"),
        (GOOD.replace("bandwidth_gb_per_s = 1.0", 'bandwidth_gb_per_s = "fast"'), "'link.bandwidth_gb_per_s' must be a number"),
        (GOOD.replace("ranks = 2", "ranks = 0"), "'nodes[0].ranks' must be at least 1"),
        (GOOD.replace("ranks = 2", "ranks = 2.5"), "'nodes[0].ranks' must be an integer"),
        (GOOD.replace('"apple-m2"', '"apple-m9"'), "'nodes[0].profile' = 'apple-m9'"),
        (GOOD.replace('"apple-m2"', '"missing.toml"'), "'nodes[0].profile' = 'missing.toml'"),
        ('name = "t"\nnodes = []\n' + GOOD[GOOD.index("[link]"): GOOD.index("[[nodes]]")], "'nodes' must list at least one node"),
        ("name = \n", "not valid TOML"),
    ],
)
def test_bad_cluster_files_fail_in_one_line(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "c.toml"
    path.write_text(text)
    with pytest.raises(ConfigError) as info:
        load_cluster(path)
    assert message in str(info.value) and str(path) in str(info.value) and "\n" not in str(info.value)


def test_loopback_is_measured_once_then_read_from_the_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    first = link_mod.loopback_link(tmp_path, machine_id="m1")  # two real gloo processes on 127.0.0.1
    assert first.bandwidth_bytes_per_s > 1e6 and first.latency_s >= 0 and first.startup_s > 0
    assert first.source.startswith("measured: gloo")
    assert (tmp_path / "calibration" / "loopback-m1.json").is_file()

    def no_second_probe() -> None:
        raise AssertionError("the cached figures should have been used")

    monkeypatch.setattr(link_mod, "measure_loopback", no_second_probe)
    assert link_mod.loopback_link(tmp_path, machine_id="m1") == first
