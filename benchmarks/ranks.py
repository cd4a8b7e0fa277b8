"""Your own job on two ranks: the weights against one process, the agent's prediction against the
measured time, and the split plan for a job. One run, one table.

    flock -x /tmp/tp-cpu.lock python benchmarks/ranks.py          # ~4 min on 2 cores
    python benchmarks/ranks.py --jobs regression,transformer --epochs 1

The five jobs of benchmarks/byo.py (byo_jobs.py), each given to the ranks as a reference
(`byo_jobs.py:make_resnet`), since each rank builds the job itself. In a fresh TRAINPILOT_HOME,
calibrated quickly once (the cost model predicts the ranks from it). For each job, with the same
seed and epochs:

  one      `fit(job, backend="cpu", threads=1)`: the single process on the whole batch.
  ranks    `fit(job, nproc=2)`: 2 gloo ranks, measured shares; timed from the call to its return
           (the launch, every rank's start-up and the training).
  predicted `parallel.rank_plans.choose_ranks_or_single` on the job's profile: the 2-rank run's
           predicted time (start-up included) and whether the agent would choose the ranks.

Printed per job: the max weight difference of the ranks against one process (relative to the
largest weight), what the model holds that a rank computes differently (BatchNorm's batch
statistics are per rank under DDP; dropout draws its masks per rank), the predicted and measured
2-rank times and their error, and the agent's choice. Then, for the jobs a split can take (no
batch-coupled layers), the split plan's time against the better of the two single-process thread
counts and its weights against one process. Verdicts: weights <= 1e-5 relative for the jobs
without batch-coupled layers; prediction error <= 30 %.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "core"))
sys.path.insert(0, str(ROOT / "benchmarks"))

JOBS = ("resnet", "mobilenet", "transformer", "regression", "augmented")
TOLERANCE = 1e-5
PREDICTION_TARGET = 0.30


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


def predicted_ranks(ref: str, epochs: int) -> tuple[float, str]:
    """(the 2-rank run's predicted seconds, the agent's choice: ranks | single) for the job."""
    from trainpilot.job.job_file import load_job
    from trainpilot.job.prepare import prepare
    from trainpilot.machine.monitor import measure_load
    from trainpilot.parallel.rank_plans import RankSpec, choose_ranks_or_single
    from trainpilot.predict import CostModel

    profile = prepare(load_job(ref), epochs=epochs).profile
    choice = choose_ranks_or_single(CostModel.open(), profile, [RankSpec(), RankSpec()], measure_load(0.3))
    return choice.multi.run_s, "ranks" if choice.chosen == "multi" else "single"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", default=",".join(JOBS), help=f"comma-separated, of {', '.join(JOBS)}")
    parser.add_argument("--epochs", type=int, default=1)
    opts = parser.parse_args(argv)
    names = [n.strip() for n in opts.jobs.split(",") if n.strip()]
    unknown = sorted(set(names) - set(JOBS))
    if unknown:
        parser.error(f"unknown job(s): {', '.join(unknown)}")
    os.environ["TRAINPILOT_HOME"] = tempfile.mkdtemp(prefix="tp-ranks-")
    from trainpilot.predict import CostModel

    print("calibrating (quick) ...", file=sys.stderr)
    CostModel.open().calibrate(quick=True)
    rows, splits, verdicts = [], [], []
    for name in names:
        ref = reference(name)
        print(f"{name}: one process, 2 ranks ...", file=sys.stderr)
        one, one_s = timed_fit(ref, epochs=opts.epochs, backend="cpu", threads=1)
        ranks, ranks_s = timed_fit(ref, epochs=opts.epochs, nproc=2)
        predicted_s, choice = predicted_ranks(ref, opts.epochs)
        diff = relative_diff(ranks.model, one.model)
        why = coupled(one.model)
        error = predicted_s / ranks_s - 1.0
        rows.append((name, diff, why, predicted_s, ranks_s, error, choice, one_s))
        if not why:
            verdicts.append((f"{name}: weights within {TOLERANCE:g} of one process", diff <= TOLERANCE))
        verdicts.append((f"{name}: 2-rank prediction within {PREDICTION_TARGET:.0%}", abs(error) <= PREDICTION_TARGET))
        if not why:
            print(f"{name}: the split plan, one process on 2 threads ...", file=sys.stderr)
            split, split_s = timed_fit(ref, epochs=opts.epochs, backend="split")
            two, two_s = timed_fit(ref, epochs=opts.epochs, backend="cpu", threads=2)
            best = min(float(one.actual_s), float(two.actual_s))
            splits.append((name, float(split.actual_s), best, best / float(split.actual_s), relative_diff(split.model, one.model)))

    print(f"\n{'job':<12} {'max weight diff':>15}  {'2 ranks: predicted':>18} {'measured':>9} {'error':>7}  {'agent':<7} what differs per rank")
    for name, diff, why, predicted_s, ranks_s, error, choice, _one_s in rows:
        print(f"{name:<12} {diff:>15.2e}  {predicted_s:>16.1f} s {ranks_s:>7.1f} s {error:>+7.0%}  {choice:<7} {why or '-'}")
    if splits:
        print(f"\n{'job':<12} {'split':>8} {'best single':>12} {'speed-up':>9} {'max weight diff':>16}")
        for name, split_s, best, ratio, diff in splits:
            print(f"{name:<12} {split_s:>6.2f} s {best:>10.2f} s {ratio:>8.2f}x {diff:>16.2e}")
    print()
    for text, ok in verdicts:
        print(f"{'met   ' if ok else 'MISSED'} {text}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
