"""What keeping freed memory in the process (core/trainpilot/allocator.py) buys a real run:
`trainpilot headless run` of each model on the bundled demo set, on one fixed plan, in fresh
processes that alternate between glibc's default malloc (TRAINPILOT_KEEP_FREED_MEMORY=0) and
TrainPilot's setting; each run's own epochs after the first are timed, and its page faults counted.
With --plain, a hand-written training loop instead (randperm batches, Adam, cross-entropy; the
4,800-sample demo set), the setting applied or not in the same way: what a short-lived loop pays.

    python benchmarks/allocator.py                          # small_cnn, wide_cnn, large_dense; 3 pairs; ~2 min
    python benchmarks/allocator.py --plain                  # the same models in a plain loop; ~3 min
    python benchmarks/allocator.py --model mlp --pairs 5

Printed per model: the median epoch time of each setting (over every timed epoch of every run),
their ratio, and the minor page faults per epoch of the child process (headless: its whole life,
divided by its epochs, so start-up faults are in both alike; plain: the timed epochs only).
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "core"))

from trainpilot.machine.allocator import OFF_SWITCH as OFF  # noqa: E402  (light: imports no torch)


def one_run(model: str, epochs: int, threads: int, keep: bool, home: str) -> tuple[list[float], float]:
    """(the epoch times after the first, minor page faults per epoch) of one headless run."""
    env = {**os.environ, "TRAINPILOT_HOME": home, OFF: "1" if keep else "0"}
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_minflt
    out = subprocess.run([sys.executable, "-m", "trainpilot_tui.entry", "headless", "run", "--model", model, "--epochs", str(epochs),
                          "--backend", "cpu", "--threads", str(threads), "--json"],
                         capture_output=True, text=True, env=env, cwd=ROOT, timeout=900)
    if out.returncode != 0:
        raise SystemExit(f"error: the {model} run failed (exit {out.returncode}): {out.stderr.strip().splitlines()[-1:]}")
    faults = resource.getrusage(resource.RUSAGE_CHILDREN).ru_minflt - before
    result = json.loads(out.stdout)
    return [e["actual_s"] for e in result["epochs"][1:]], faults / epochs


def plain_run(model: str, epochs: int, threads: int, keep: bool, _home: str) -> tuple[list[float], float]:
    """(the epoch times after the first, minor page faults per timed epoch) of a plain loop in a child."""
    env = {**os.environ, OFF: "1" if keep else "0"}
    out = subprocess.run([sys.executable, __file__, "--child", model, "--epochs", str(epochs), "--threads", str(threads)],
                         capture_output=True, text=True, env=env, cwd=ROOT, timeout=900)
    if out.returncode != 0:
        raise SystemExit(f"error: the plain {model} loop failed (exit {out.returncode}): {out.stderr.strip().splitlines()[-1:]}")
    result = json.loads(out.stdout)
    return result["epoch_s"], result["faults_per_epoch"]


def plain_child(model: str, epochs: int, threads: int) -> None:
    import time

    import torch
    from torch import nn

    from trainpilot.machine.allocator import keep_freed_memory
    from trainpilot.job.data import demo_dataset
    from trainpilot.job.models import build_model

    keep_freed_memory()  # honours TRAINPILOT_KEEP_FREED_MEMORY=0, as a run does
    torch.set_num_threads(threads)
    data = demo_dataset(4800)
    x, y = torch.as_tensor(data.X, dtype=torch.float32), torch.as_tensor(data.y)
    torch.manual_seed(0)
    net = build_model(model, data.sample_shape, data.num_classes)
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    times, faults = [], 0
    for epoch in range(epochs):
        before, start = resource.getrusage(resource.RUSAGE_SELF).ru_minflt, time.perf_counter()
        order = torch.randperm(len(x))
        for i in range(0, len(x) - 63, 64):
            batch = order[i:i + 64]
            opt.zero_grad(set_to_none=True)
            nn.functional.cross_entropy(net(x[batch]), y[batch]).backward()
            opt.step()
        if epoch > 0:  # the first epoch allocates for good: not timed
            times.append(time.perf_counter() - start)
            faults += resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
    print(json.dumps({"epoch_s": times, "faults_per_epoch": faults / len(times)}))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", action="append", help="zoo model (repeatable; default small_cnn, wide_cnn, large_dense)")
    parser.add_argument("--pairs", type=int, default=3, help="runs of each setting, alternating")
    parser.add_argument("--epochs", type=int, default=3, help="epochs per run (the first is not timed)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--plain", action="store_true", help="a hand-written training loop instead of `trainpilot headless run`")
    parser.add_argument("--child", metavar="MODEL", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        plain_child(args.child, args.epochs, args.threads)
        return 0
    if args.epochs < 2 or args.pairs < 1:
        parser.error("--epochs must be at least 2 and --pairs at least 1")

    models = args.model or ["small_cnn", "wide_cnn", "large_dense"]
    run = plain_run if args.plain else one_run
    what = "a plain training loop on the 4,800-sample demo set" if args.plain else "headless run on the demo set"
    print(f"{what}, cpu, {args.threads} threads; {args.pairs} runs of each setting, alternating;"
          f" epochs 2-{args.epochs} of each run timed")
    print(f"{'model':<12} {'glibc default':<16} {'freed memory kept':<18} {'kept / default':<15} {'faults/epoch: default':<22} {'kept'}")
    with tempfile.TemporaryDirectory(prefix="tp-allocator-") as home:
        if not args.plain:
            one_run(models[0], 2, args.threads, True, home)  # the first run on a machine calibrates: not timed
        for model in models:
            times: dict[bool, list[float]] = {False: [], True: []}
            faults: dict[bool, list[float]] = {False: [], True: []}
            for i in range(args.pairs):
                for keep in ((False, True) if i % 2 == 0 else (True, False)):
                    epoch_s, per_epoch = run(model, args.epochs, args.threads, keep, home)
                    times[keep] += epoch_s
                    faults[keep].append(per_epoch)
                    print(f"  {model} {'kept' if keep else 'default'}: {' '.join(f'{t:.3f}' for t in epoch_s)} s", file=sys.stderr, flush=True)
            default, kept = statistics.median(times[False]), statistics.median(times[True])
            print(f"{model:<12} {default:<16.3f} {kept:<18.3f} {kept / default:<15.3f} {statistics.median(faults[False]):<22,.0f}"
                  f" {statistics.median(faults[True]):,.0f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
