"""Your own job on two ranks: the weights against one process, the agent's prediction against the
measured time, a slowed rank, two torchrun nodes on loopback, and the split plan for a job. One run.

    flock -x /tmp/tp-cpu.lock python benchmarks/ranks.py          # ~5 min on 2 cores
    python benchmarks/ranks.py --jobs regression --parts jobs      # one job, the first table only

Each job is given to the ranks as a reference (`byo_jobs.py:make_resnet`), since each rank builds
the job itself. In a fresh TRAINPILOT_HOME, calibrated quickly once. Then one 2-rank launch of a
zoo model, as a user's first `--nproc` run on a machine: the agent learns what a launch costs here
from it (parallel/launch_cost.py), as it would from any earlier run; no job below teaches its own
prediction. The parts (`--parts`, default all):

jobs     The five jobs of benchmarks/byo.py, each with the same seed and epochs:
           predicted  `plan_job(job=ref, nproc=2)`, the product's `headless plan --nproc 2`, made
                      before the ranks run: their predicted time (start-up included), and whether
                      the agent would choose them over the best single process;
           one        `fit(ref, backend="cpu", threads=1)`: one process on the whole batch;
           ranks      `fit(ref, nproc=2)`: 2 gloo ranks, measured shares, timed from the call to
                      its return (the launch, every rank's start-up and the training);
           split      for a job with nothing batch-coupled: the split plan, one process stepping
                      on the same two shares of each batch (float order alone, without ranks).
         Printed: the ranks' max weight difference against one process (relative to the largest
         weight), the split's, what a rank computes differently (BatchNorm's batch statistics are
         per rank under DDP, dropout draws its masks per rank), predicted and measured 2-rank
         times and their error, and the agent's choice.
slowed   The in-memory CNN job (`make_cnn`, batch 256, 3 epochs) on 2 ranks with busy loops on
         rank 1's core (as hetero.py does): `--shares equal` and measured shares alternate
         `--pairs` times; the medians of their training times are compared, and each run's
         weights against one process's on an idle machine. Equal shares on ranks compute what one
         process computes on the same halves (the jobs part shows it), so their distance from one
         process is what float order alone does to this CNN; the measured shares are judged
         against it (within 2x, as equivalence.py judges the zoo's ranks).
torchrun Two `torchrun --nnodes 2` launches (c10d rendezvous on 127.0.0.1), one rank each, of a
         job file: success, and how many times the history records the run.
split    The CNN job's split plan against the better of one process's 1 and 2 threads, and its
         weights against one process's.

Verdicts: weights <= 1e-5 relative (jobs without batch-coupled layers), against one process on the
whole batch and against one process on the same shares; prediction error <= 30 %; measured
shares >= 1.3x faster than equal shares beside a slowed rank; torchrun recorded once. How far float
order alone carries a run: benchmarks/float_order.py.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "core"))
sys.path.insert(0, str(ROOT / "benchmarks"))

JOBS = ("resnet", "mobilenet", "transformer", "regression", "augmented")
PARTS = ("jobs", "slowed", "torchrun", "split")
TOLERANCE = 1e-5
PREDICTION_TARGET = 0.30
SHARES_TARGET = 1.3
END_MARGIN = 2.0  # a run on other shares is one more float-order perturbation (equivalence.py)


def reference(name: str) -> str:
    return f"{ROOT / 'benchmarks' / 'byo_jobs.py'}:make_{name}"


def relative_diff(a: Any, b: Any) -> float:
    sa, sb = a.state_dict(), b.state_dict()
    return max(
        float((sa[k].double() - sb[k].double()).abs().max() / sb[k].double().abs().max().clamp_min(1e-12))
        for k in sb
        if sb[k].is_floating_point()
    )


def coupled(model: Any) -> str:
    """What in `model` a rank's share computes differently from the whole batch: '' when nothing."""
    from torch import nn

    kinds = []
    if any(isinstance(m, nn.modules.batchnorm._BatchNorm) for m in model.modules()):
        kinds.append("BatchNorm (batch statistics per rank)")
    if any(isinstance(m, nn.Dropout) and m.p > 0 for m in model.modules()) or any(
        getattr(m, "dropout", 0) for m in model.modules() if isinstance(m, nn.MultiheadAttention)
    ):
        kinds.append("dropout (masks drawn per rank)")
    return "; ".join(kinds)


def timed_fit(ref: str, **options: Any) -> tuple[Any, float]:
    import trainpilot

    start = time.perf_counter()
    result = trainpilot.fit(ref, seed=3, adapt="off", **options)
    wall = time.perf_counter() - start
    if not result.ok:
        raise SystemExit(f"{ref} {options}: {result.status}: {result.data.get('message')}")
    return result, wall


def predicted_ranks(ref: str, epochs: int) -> dict[str, Any]:
    """What `headless plan --job REF --nproc 2 --json` says of the ranks."""
    from trainpilot.agent.planning import plan_job

    return plan_job("mlp", None, epochs=epochs, job=ref, nproc=2)["ranks"]


def part_jobs(names: list[str], epochs: int, verdicts: list[tuple[str, bool]]) -> None:
    rows = []
    for name in names:
        ref = reference(name)
        print(f"{name}: predicting, one process, 2 ranks ...", file=sys.stderr)
        ranks_plan = predicted_ranks(ref, epochs)
        one, _ = timed_fit(ref, epochs=epochs, backend="cpu", threads=1)
        ranks, ranks_s = timed_fit(ref, epochs=epochs, nproc=2)
        why = coupled(one.model)
        split_diff = same_shares = None
        if not why:
            split, _ = timed_fit(ref, epochs=epochs, backend="split")
            split_diff = relative_diff(split.model, one.model)
            same_shares = relative_diff(ranks.model, split.model)
        predicted_s = float(ranks_plan["multi"]["run_s"])
        diff, error = relative_diff(ranks.model, one.model), predicted_s / ranks_s - 1.0
        choice = "ranks" if ranks_plan["chosen"] == "multi" else "single"
        rows.append((name, diff, split_diff, same_shares, why, predicted_s, ranks_s, error, choice))
        if not why:
            verdicts.append((f"{name}: ranks' weights within {TOLERANCE:g} of one process ({diff:.1e})", diff <= TOLERANCE))
            verdicts.append((f"{name}: ranks' weights within {TOLERANCE:g} of one process on the same shares ({same_shares:.1e})", (same_shares or 0.0) <= TOLERANCE))
        verdicts.append((f"{name}: 2-rank prediction within {PREDICTION_TARGET:.0%} ({error:+.0%})", abs(error) <= PREDICTION_TARGET))
    print("\nmax weight difference, relative: ranks and split (one process on the same 2 shares) against one process on the whole batch, ranks against split")
    print(f"{'job':<12} {'ranks/one':>9} {'split/one':>9} {'ranks/split':>11}  {'2 ranks: predicted':>18} {'measured':>9} {'error':>6}  {'agent':<6} what differs per rank")
    for name, diff, split_diff, same_shares, why, predicted_s, ranks_s, error, choice in rows:
        split_text = f"{split_diff:.2e}" if split_diff is not None else "-"
        same_text = f"{same_shares:.2e}" if same_shares is not None else "-"
        print(f"{name:<12} {diff:>9.2e} {split_text:>9} {same_text:>11}  {predicted_s:>16.1f} s {ranks_s:>7.1f} s {error:>+6.0%}  {choice:<6} {why or '-'}")


def part_slowed(epochs: int, pairs: int, busy: int, verdicts: list[tuple[str, bool]]) -> None:
    from hetero import BusyCore

    ref = reference("cnn")
    cores = sorted(os.sched_getaffinity(0))
    if len(cores) < 2:
        print("slowed: needs 2 cores; skipped", file=sys.stderr)
        return
    print("slowed: one process on an idle machine ...", file=sys.stderr)
    one, _ = timed_fit(ref, epochs=epochs, backend="cpu", threads=1)
    runs: dict[str, list[Any]] = {"equal": [], "measured": []}
    with BusyCore(cores[-1], busy):  # rank 1 is pinned to the last core (parallel/rank_env.py)
        for pair in range(pairs):
            for policy in ("equal", "measured"):
                print(f"slowed: pair {pair + 1}/{pairs}, {policy} shares ...", file=sys.stderr)
                runs[policy].append(timed_fit(ref, epochs=epochs, nproc=2, shares=policy)[0])
    train = {p: [float(r.actual_s) for r in rs] for p, rs in runs.items()}
    speedup = statistics.median(train["equal"]) / statistics.median(train["measured"])
    shares = runs["measured"][-1].data["distributed"]["speeds"]["shares"]
    diffs = {p: max(relative_diff(r.model, one.model) for r in rs) for p, rs in runs.items()}
    print(f"\nslowed rank ({busy} busy loops on core {cores[-1]}), cnn, {epochs} epoch(s), {pairs} pair(s):")
    for policy in ("equal", "measured"):
        times = ", ".join(f"{t:.2f}" for t in train[policy])
        print(f"  {policy:<8} shares: training {statistics.median(train[policy]):.2f} s (runs: {times}); max weight diff vs one process {diffs[policy]:.2e}")
    print(f"  measured shares {'+'.join(map(str, shares))} (last run): {speedup:.2f}x faster than equal shares")
    verdicts.append((f"slowed rank: measured shares >= {SHARES_TARGET}x faster than equal ({speedup:.2f}x)", speedup >= SHARES_TARGET))
    verdicts.append((f"slowed rank: weights within {TOLERANCE:g} of one process ({diffs['measured']:.1e})", diffs["measured"] <= TOLERANCE))
    # equal shares on ranks are one process stepping on the same halves (the jobs part: ranks
    # against split ~1e-6), so their distance from one process is float order's alone
    spread = diffs["equal"]
    verdicts.append((f"slowed rank: weights within {END_MARGIN:g}x the float-order spread of equal shares"
                     f" ({diffs['measured']:.1e} against {spread:.1e})", diffs["measured"] <= END_MARGIN * spread))


def part_torchrun(verdicts: list[tuple[str, bool]]) -> None:
    from trainpilot.paths import history_db_path
    from trainpilot.predict.history import History

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    node = [sys.executable, "-m", "torch.distributed.run", "--nnodes", "2", "--nproc-per-node", "1", "--rdzv-backend", "c10d",
            "--rdzv-endpoint", f"127.0.0.1:{port}", "--rdzv-id", "tp-ranks-benchmark", "-m", "trainpilot_tui", "headless", "run",
            "--job", reference("regression"), "-e", "1", "--seed", "3", "-q", "--json", "--adapt", "off"]
    print("torchrun: two --nnodes 2 launches on loopback ...", file=sys.stderr)
    start = time.perf_counter()
    launches = [subprocess.Popen(node, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    outputs = [p.communicate(timeout=600) for p in launches]
    wall = time.perf_counter() - start
    codes = [p.returncode for p in launches]
    printed = [json.loads(out) for out, _ in outputs if out.strip()]
    result = printed[0] if len(printed) == 1 else {}
    records = [r for r in History(history_db_path()).records() if r.run_id == result.get("run_id")]
    ok = codes == [0, 0] and result.get("status") == "success" and len(records) == 1
    print(f"\ntorchrun, 2 nodes on 127.0.0.1 (regression job): exit codes {codes}, status {result.get('status')},"
          f" world size {result.get('distributed', {}).get('world_size')}, {len(records)} history record(s), {wall:.1f} s")
    if not ok:
        for _out, err in outputs:
            print(err[-1500:], file=sys.stderr)
    verdicts.append(("torchrun across 2 nodes on loopback: success, recorded once", ok))


def part_split(epochs: int, verdicts: list[tuple[str, bool]]) -> None:
    ref = reference("cnn")
    print("split: the cnn job on the split plan, one process on 1 and 2 threads ...", file=sys.stderr)
    one, _ = timed_fit(ref, epochs=epochs, backend="cpu", threads=1)
    two, _ = timed_fit(ref, epochs=epochs, backend="cpu", threads=2)
    split, _ = timed_fit(ref, epochs=epochs, backend="split")
    best = min(float(one.actual_s), float(two.actual_s))
    diff = relative_diff(split.model, one.model)
    print(f"\nsplit plan, cnn, {epochs} epoch(s): {float(split.actual_s):.2f} s against the better single process"
          f" {best:.2f} s (cpu×1 {float(one.actual_s):.2f} s, cpu×2 {float(two.actual_s):.2f} s): {best / float(split.actual_s):.2f}x;"
          f" max weight diff vs one process {diff:.2e}")
    verdicts.append((f"split of a job: weights within {TOLERANCE:g} of one process ({diff:.1e})", diff <= TOLERANCE))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", default=",".join(JOBS), help=f"comma-separated, of {', '.join(JOBS)}")
    parser.add_argument("--parts", default=",".join(PARTS), help=f"comma-separated, of {', '.join(PARTS)}")
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--pairs", type=int, default=2, help="equal/measured pairs beside the slowed rank (default 2)")
    parser.add_argument("--busy", type=int, default=2, help="busy loops on the slowed rank's core (default 2: about 2x, hetero.py says why)")
    opts = parser.parse_args(argv)
    names = [n.strip() for n in opts.jobs.split(",") if n.strip()]
    parts = [p.strip() for p in opts.parts.split(",") if p.strip()]
    for what, given, known in (("job", names, JOBS), ("part", parts, PARTS)):
        unknown = sorted(set(given) - set(known))
        if unknown:
            parser.error(f"unknown {what}(s): {', '.join(unknown)}")
    os.environ["TRAINPILOT_HOME"] = tempfile.mkdtemp(prefix="tp-ranks-")
    from trainpilot.parallel.launch_cost import launch_overhead
    from trainpilot.predict import CostModel

    started = time.perf_counter()
    print("calibrating (quick), then a first 2-rank launch of a zoo model ...", file=sys.stderr)
    CostModel.open().calibrate(quick=True)
    subprocess.run([sys.executable, "-m", "trainpilot_tui", "headless", "run", "-m", "mlp", "-e", "1", "--nproc", "2", "-q"], check=True)
    learned = launch_overhead(2, 0.0)
    print(f"first launch on this machine: {learned.seconds:.1f} s beyond training and preparation ({learned.source})")
    verdicts: list[tuple[str, bool]] = []
    if "jobs" in parts:
        part_jobs(names, opts.epochs, verdicts)
    if "slowed" in parts:
        part_slowed(max(opts.epochs, 3), opts.pairs, opts.busy, verdicts)
    if "torchrun" in parts:
        part_torchrun(verdicts)
    if "split" in parts:
        part_split(max(opts.epochs, 3), verdicts)
    print()
    for text, ok in verdicts:
        print(f"{'met   ' if ok else 'MISSED'} {text}")
    print(f"\n(the whole run: {time.perf_counter() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
