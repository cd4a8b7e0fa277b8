"""benchmarks/compress_resolution.py --time-only: every configuration is timed, in groups small
enough that each is measured beside the dense model without the others crowding the cache (the
timing itself is compress.cycles.measure_steps, tested there; here it is replaced to count)."""
from __future__ import annotations

import argparse
from pathlib import Path

from trainpilot.compress.prune import check_prunable
from trainpilot.job.data import demo_dataset
from trainpilot.job.models import build_model

BENCH = Path(__file__).resolve().parents[3] / "benchmarks"


def test_time_only_times_every_configuration_in_groups_and_ranks_them(capsys, monkeypatch):
    monkeypatch.syspath_prepend(str(BENCH))
    import compress_resolution as cr

    data = demo_dataset(64)
    kept_of = {f"{a}/{b}": [a, b] for a in (4, 8, 12, 16) for b in (8, 16, 24, 32)}  # 16 configurations
    groups: list[list[str]] = []

    def fake_time(dense, layers, full, group, shape, num_classes, *, batch, threads, timings):
        groups.append(list(group))
        return {k: [32 * 16 / (v[0] * v[1])] * timings for k, v in group.items()}  # fewer channels, faster

    monkeypatch.setattr(cr, "time_configurations", fake_time)
    args = argparse.Namespace(model="small_cnn", dataset="demo", threads=1, time_only=3)
    dense = build_model("small_cnn", data.sample_shape, data.num_classes)
    layers = check_prunable(dense, data.sample_shape)
    full = {layer.name: layer.out_channels for layer in layers.prunable}
    assert full == {"features.0": 16, "features.3": 32}
    assert cr.time_only(args, dense, layers, full, kept_of, data.sample_shape, data.num_classes, batch=64) == 0
    assert [len(g) for g in groups] == [cr.GROUP, len(kept_of) - cr.GROUP]
    assert sorted(k for g in groups for k in g) == sorted(kept_of)
    lines = capsys.readouterr().out.strip().splitlines()
    assert "median of 3 timings" in lines[0]
    rows = {line.split()[0]: line.split()[1:3] for line in lines[1:]}
    assert len(rows) == len(kept_of) and lines[1].split()[0] == "4/8" and lines[-1].split()[0] == "16/32"  # fastest first
    assert rows["4/8"] == ["uniform", "16.00x"] and rows["16/32"] == ["uniform", "1.00x"]
    assert rows["16/8"] == ["non-uniform", "4.00x"]
