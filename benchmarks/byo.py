"""Your own job: does the agent predict and plan jobs it has never seen? One run, a table.

    flock -x /tmp/tp-cpu.lock python benchmarks/byo.py            # ~4 min on 2 cores
    python benchmarks/byo.py --jobs transformer,augmented --passes 2

Five jobs outside the zoo (byo_jobs.py: ResNet, MobileNet, a Transformer on int64 tokens, a
regression MLP, a Dataset with per-item augmentation), in a fresh TRAINPILOT_HOME (calibrated on
first sight, as a user's first run is). For each job:

  cold    `trainpilot.plan(job)` before any run: every plan's prediction, the agent's choice A.
  passes  A and Lightning's default L (the first available device — the CPU here — with all
          threads and num_workers=0) are trained side by side, `--passes` times, alternating
          which goes first; each run is recorded, so pass k is predicted with k-1 earlier runs
          of the same job and plan.
  workers for a job that loads through a Dataset, A's threads with every worker count, once
          each, to show the count the agent picked against the best measured.

Printed: per job the cold error of A's and L's predictions against pass 1, the warm error (last
pass), the oracle's error on the last pass (each run predicted by the mean of the same job and
plan's other passes, as benchmarks/decisions.py defines it), L/A time ratio (mean of the passes),
and the worker counts; then the verdicts: cold MAPE <= 30 %, warm <= oracle + 1 point, A never
slower than L by more than 5 %, >= 1.2x where loading costs about what compute does.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "core"))
sys.path.insert(0, str(ROOT / "benchmarks"))


def mape(pairs: list[tuple[float, float]]) -> float:
    return 100.0 * statistics.mean(abs(p - a) / a for p, a in pairs) if pairs else float("nan")


def run(job, plan, epochs: int) -> tuple[float, float]:
    """(predicted_s, actual_s) of one recorded run of `job` on `plan` (forced: threads, workers)."""
    import trainpilot

    result = trainpilot.fit(
        job,
        epochs=epochs,
        backend=plan.backend,
        threads=plan.threads,
        workers=plan.loader_workers or 0 if job_loads(job) else None,
    )
    if not result.ok:
        raise SystemExit(f"{job.title} on {plan.label} failed: {result.message}")
    return float(result.predicted_s or float("nan")), float(result.actual_s)


def job_loads(job) -> bool:
    from torch.utils.data import Dataset

    return isinstance(job.data, Dataset)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--jobs", default="resnet,mobilenet,transformer,regression,augmented")
    parser.add_argument("--passes", type=int, default=3)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--home", help="TRAINPILOT_HOME to use (default: a fresh temporary one)")
    args = parser.parse_args()
    os.environ["TRAINPILOT_HOME"] = args.home or tempfile.mkdtemp(prefix="tp-byo-")
    os.environ.setdefault("TRAINPILOT_AUTO_CALIBRATE", "1")

    import trainpilot
    from byo_jobs import JOBS
    from trainpilot.machine.probe import usable_cpus
    from trainpilot.plans import Plan

    cores = usable_cpus()
    print(f"TRAINPILOT_HOME={os.environ['TRAINPILOT_HOME']}  cores={cores}  passes={args.passes}  epochs={args.epochs}")
    rows = []
    started = time.perf_counter()
    for name in args.jobs.split(","):
        make = JOBS[name]
        report = trainpilot.plan(make(), epochs=args.epochs)
        agent = report.plan
        lightning = Plan("cpu", threads=cores)
        cold = {
            Plan.from_dict(p): p["predicted_s"] for p in report.plans if p["predicted_s"] is not None
        }
        measured: dict[Plan, list[tuple[float, float]]] = {agent: [], lightning: []}
        for k in range(args.passes):
            order = [agent, lightning] if k % 2 == 0 else [lightning, agent]
            for plan in dict.fromkeys(order):  # A may be L: once a pass then
                measured[plan].append(run(make(), plan, args.epochs))
        workers = {}
        if job_loads(make()):
            for w in range(0, cores + 1):
                plan = Plan(agent.backend, threads=agent.threads, loader_workers=w or None)
                workers[w] = (
                    statistics.mean(a for _p, a in measured[plan]) if plan in measured else run(make(), plan, args.epochs)[1]
                )
        rows.append((name, report, agent, lightning, cold, measured, workers))
        print(f"  {name}: {agent.label}, confidence {report.confidence:.2f}", flush=True)

    print(f"\nbenchmarks/byo.py: {len(rows)} jobs, {time.perf_counter() - started:.0f} s")
    head = f"{'job':<12} {'agent plan A':<34} {'cold A':>7} {'cold L':>7} {'warm':>6} {'oracle':>6} {'L/A':>6}  workers (s by count)"
    print(head)
    print("-" * len(head))
    cold_all, warm_all, oracle_all, verdicts = [], [], [], []
    for name, _report, agent, lightning, cold, measured, workers in rows:
        first = {p: runs[0][1] for p, runs in measured.items()}
        cold_a = mape([(cold[agent], first[agent])]) if agent in cold else float("nan")
        cold_l = mape([(cold[lightning], first[lightning])]) if lightning in cold else float("nan")
        cold_all += [(cold[p], first[p]) for p in measured if p in cold]
        last = [(runs[-1][0], runs[-1][1]) for runs in measured.values()]
        oracle = [
            (statistics.mean(a for _p, a in runs[:-1]), runs[-1][1]) for runs in measured.values() if len(runs) > 1
        ]
        warm_all += last
        oracle_all += oracle
        ratio = statistics.mean(a for _p, a in measured[lightning]) / statistics.mean(a for _p, a in measured[agent])
        picked = agent.loader_workers or 0
        best = min(workers, key=workers.get) if workers else None
        wtext = (
            " ".join(f"{w}:{s:.2f}" for w, s in workers.items()) + f"  picked {picked}, best {best}" if workers else "-"
        )
        print(
            f"{name:<12} {agent.label:<34} {cold_a:6.1f}% {cold_l:6.1f}% {mape(last):5.1f}% {mape(oracle):5.1f}%"
            f" {ratio:5.2f}x  {wtext}"
        )
        verdicts.append((name, ratio, workers))
    print("\nevery run, pass by pass (predicted / actual s; pass 1's prediction is the fit's own, after the plan's):")
    for name, _r, _a, _l, _c, measured, _w in rows:
        for plan, runs in measured.items():
            print(f"   {name:<12} {plan.label:<34} " + "  ".join(f"{p:.2f}/{a:.2f}" for p, a in runs))
    print()
    cold_m, warm_m, oracle_m = mape(cold_all), mape(warm_all), mape(oracle_all)
    print(f"cold MAPE (A and L, pass 1, before any run): {cold_m:.1f} %  (target <= 30 %: {'met' if cold_m <= 30 else 'NOT met'})")
    for name, _r, agent, lightning, cold, measured, _w in rows:
        errs = [abs(cold[p] - measured[p][0][1]) / measured[p][0][1] * 100 for p in measured if p in cold]
        print(f"   {name:<12} {max(errs):5.1f} % worst plan")
    ok = warm_m <= oracle_m + 1.0
    print(f"warm MAPE (pass {args.passes}) vs oracle on the same runs: {warm_m:.1f} % vs {oracle_m:.1f} %"
          f"  (target warm <= oracle + 1 point: {'met' if ok else 'NOT met'})")
    slow = [n for n, r, _w in verdicts if r < 0.95]
    print(f"agent vs Lightning's default: never slower by more than 5 %: {'met' if not slow else 'NOT met: ' + ', '.join(slow)}")
    for name, ratio, workers in verdicts:
        if workers:
            print(f"   {name} (loads through a Dataset): {ratio:.2f}x  (target >= 1.2x: {'met' if ratio >= 1.2 else 'NOT met'})")


if __name__ == "__main__":
    main()
