"""The one short label of every plan kind: what a person reads in tables, traces and panels."""
from __future__ import annotations

import pytest

from trainpilot.plans import Plan

CPU1, CPU2 = Plan("cpu", threads=1), Plan("cpu", threads=2)


@pytest.mark.parametrize(
    ("plan", "short"),
    [
        (CPU2, "cpu×2"),
        (Plan("cpu"), "cpu"),
        (Plan("cpu", threads=2, mode="compiled"), "cpu×2 · compiled"),
        (CPU1.with_settings("channels_last"), "cpu×1 · cl"),
        (CPU1.with_settings(precision="bf16"), "cpu×1 · bf16"),
        (CPU2.with_settings("channels_last", "fp16"), "cpu×2 · cl · fp16"),
        (CPU1.with_loader(1), "cpu×1 · 1 loader"),
        (CPU1.with_loader(2), "cpu×1 · 2 loaders"),
        (Plan("cpu", threads=2, mode="compiled", loader_workers=2, memory_format="channels_last", precision="bf16"),
         "cpu×2 · compiled · cl · bf16 · 2 loaders"),
        (Plan.split((CPU1, CPU1)), "split 1+1"),
        (Plan.split((CPU1, CPU1)).with_settings("channels_last", "bf16"), "split 1+1 · cl · bf16"),
        (Plan.split((Plan("cpu", threads=3), CPU1)), "split 3+1"),
        (Plan.split((Plan("cuda", device="cuda:0"), CPU1)), "split cuda:0+cpu×1"),
        (Plan("cuda"), "cuda"),
        (Plan("cuda", device="cuda:0", precision="bf16"), "cuda:0 · bf16"),
        (Plan("cuda", device="cuda:1"), "cuda:1"),
        (Plan("mps", device="mps"), "mps"),
        (Plan("ane", mode="frozen-backbone"), "ane · frozen-backbone"),
        (Plan("ane", mode="core-ml-update"), "ane · core-ml-update"),
    ],
)
def test_short_label_of_every_plan_kind(plan: Plan, short: str) -> None:
    assert plan.short_label == short
    assert plan.label != short or plan.label in ("cpu", "cuda", "mps")  # the long form stays for --json and --verbose


def test_short_labels_tell_every_plan_the_agent_weighs_apart() -> None:
    """Two plans never read the same: a label names the plan exactly."""
    threads = (1, 2, 4)
    plans = {
        Plan("cpu", threads=t, mode=mode, loader_workers=w).with_settings(layout, precision)
        for t in threads
        for mode in (None, "compiled")
        for w in (None, 1, 2)
        for layout in (None, "channels_last")
        for precision in (None, "bf16", "fp16")
    }
    plans |= {Plan.split((Plan("cpu", threads=a), Plan("cpu", threads=b))).with_settings(layout) for a in threads for b in threads for layout in (None, "channels_last")}
    labels = [p.short_label for p in plans]
    assert len(set(labels)) == len(plans)
