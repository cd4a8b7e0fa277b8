"""Same math, faster: the agent's plan against PyTorch's default way and against the best plan
found by measuring every plan. One run, a table.

    flock -x /tmp/tp-cpu.lock python benchmarks/plan_vs_default.py          # alone: it times (docs/measurements.md)
    python benchmarks/plan_vs_default.py --jobs small_cnn,resnet --passes 1 --epochs 1

Jobs: every zoo model on the bundled demo set, and the five jobs of benchmarks/byo.py
(byo_jobs.py), in a fresh TRAINPILOT_HOME (calibrated on first sight, as a user's first run is).
For each job:

  cold     `trainpilot.plan(job)`: every plan's prediction and the agent's choice A, fp32 (the
           default precision: mixed precision changes the numerics, so it is asked for apart).
  measure  every plan the agent could predict is trained for real (`trainpilot.fit`, forced to
           it), `--passes` times, the order reversed each pass; D, PyTorch's default way (NCHW,
           fp32, eager, all threads, num_workers=0), is one of them. Each run is recorded, so the
           second pass is predicted with the first in the history (warm).
  warm     `trainpilot.plan(job)` again after those runs: the agent's warm choice.
  mixed    `trainpilot.fit(job, precision="auto")`: what the agent picks when it may weigh bf16 or
           fp16, with its validation metric beside A's fp32 one (or the reason it is excluded).

A plan's time is the mean of its passes' training time (whole run: warm-up included). Printed per
job: D, A (cold), the warm choice and the best measured plan with their times, D/A, regret
A/best - 1, and the cold and warm prediction error of the plans that keep PyTorch's layout
("old") and of those in channels_last or mixed precision ("new"); then the verdicts of the issue:
D/A median >= 1.25x over the convolutional jobs, never < 0.97x, median regret <= 5 %.
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

ZOO_JOBS = ("small_cnn", "wide_cnn", "mlp", "large_dense", "rnn")
BYO_JOBS = ("resnet", "mobilenet", "transformer", "regression", "augmented")


def make_job(name: str):  # type: ignore[no-untyped-def]
    if name in ZOO_JOBS:
        from trainpilot.job.data import resolve_dataset
        from trainpilot.job.models import ModelSpec
        from trainpilot.job.spec import zoo_job

        return zoo_job(ModelSpec.from_config(name), resolve_dataset(None), batch_size=64)
    from byo_jobs import JOBS

    return JOBS[name]()


def loads(job) -> bool:  # type: ignore[no-untyped-def]
    from torch.utils.data import Dataset

    return isinstance(job.data, Dataset)


def fit_on(name: str, plan, epochs: int, **extra):  # type: ignore[no-untyped-def]
    """One recorded run of job `name` forced onto `plan`: its device, threads, compilation,
    loader workers, layout and precision."""
    import trainpilot

    job = make_job(name)
    if plan is None:
        result = trainpilot.fit(job, epochs=epochs, **extra)
    else:
        result = trainpilot.fit(
            job,
            epochs=epochs,
            backend=plan.backend,
            threads=plan.threads if plan.backend == "cpu" else None,
            compile=plan.is_compiled,
            workers=(plan.loader_workers or 0) if loads(job) else None,
            memory_format=plan.memory_format or "contiguous",
            precision=plan.precision or "fp32",
        )
    if not result.ok:
        raise SystemExit(f"{name} on {plan.label if plan else 'the agent plan'} failed: {result.message}")
    return result


def is_new(plan) -> bool:  # type: ignore[no-untyped-def]
    return bool(plan.memory_format or plan.precision)


def ape(predicted: float | None, actual: float) -> float | None:
    return None if predicted is None else 100.0 * abs(predicted - actual) / actual


def fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.4f}"


def mean_or_nan(values: list[float]) -> float:
    return statistics.mean(values) if values else float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--jobs", default=",".join(ZOO_JOBS + BYO_JOBS))
    parser.add_argument("--passes", type=int, default=2)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--home", help="TRAINPILOT_HOME to use (default: a fresh temporary one)")
    args = parser.parse_args()
    os.environ["TRAINPILOT_HOME"] = args.home or tempfile.mkdtemp(prefix="tp-pvd-")
    os.environ.setdefault("TRAINPILOT_AUTO_CALIBRATE", "1")

    import trainpilot
    from trainpilot.machine.precision_support import cpu_vector_isa, native_precision
    from trainpilot.machine.probe import usable_cpus
    from trainpilot.plans import Plan

    cores = usable_cpus()
    bf16 = native_precision(Plan("cpu"), "bf16")
    print(
        f"TRAINPILOT_HOME={os.environ['TRAINPILOT_HOME']}  cores={cores}  passes={args.passes}  epochs={args.epochs}"
        f"  cpu={cpu_vector_isa()}, bf16 {'native' if bf16 else 'not native: ' + bf16.reason}",
        flush=True,
    )
    started = time.perf_counter()
    rows = []
    for name in args.jobs.split(","):
        job = make_job(name)
        report = trainpilot.plan(job, epochs=args.epochs)
        cold = {Plan.from_dict(p): p["predicted_s"] for p in report.plans if p["predicted_s"] is not None}
        default = Plan("cpu", threads=cores, loader_workers=None)
        plans = list(dict.fromkeys([default, *cold]))
        convolutional = any(p.memory_format for p in cold)
        runs: dict[Plan, list[tuple[float | None, float]]] = {p: [] for p in plans}
        metrics: dict[Plan, list[tuple[float | None, float | None]]] = {p: [] for p in plans}
        for k in range(args.passes):
            for plan in plans if k % 2 == 0 else reversed(plans):
                result = fit_on(name, plan, args.epochs)
                runs[plan].append((result.predicted_s, float(result.actual_s)))
                metrics[plan].append((result.to_dict().get("val_accuracy"), result.to_dict().get("val_loss")))
        warm = trainpilot.plan(make_job(name), epochs=args.epochs)
        mixed = None
        if bf16:
            result = fit_on(name, None, args.epochs, precision="auto")
            mixed = (
                result.plan,
                float(result.actual_s),
                result.to_dict().get("val_accuracy"),
                result.to_dict().get("val_loss"),
            )
        reference = metrics.get(report.plan) or metrics[default]  # the fp32 run the mixed one is set beside
        rows.append((name, convolutional, report, warm, cold, runs, default, (mixed, reference[0])))
        times = {p: statistics.mean(a for _p, a in r) for p, r in runs.items()}
        best = min(times, key=times.get)
        print(
            f"  {name}: A {report.plan.label} {times.get(report.plan, float('nan')):.2f}s, D {times[default]:.2f}s,"
            f" best {best.label} {times[best]:.2f}s ({len(plans)} plans, {time.perf_counter() - started:.0f}s so far)",
            flush=True,
        )

    print(f"\nbenchmarks/plan_vs_default.py: {len(rows)} jobs, {time.perf_counter() - started:.0f} s")
    head = (
        f"{'job':<12} {'D s':>6} {'agent plan A (cold)':<40} {'A s':>6} {'D/A':>6} {'best measured':<40} {'best s':>6}"
        f" {'regret':>7} {'warm plan':<40} {'D/warm':>6}"
    )
    print(head)
    print("-" * len(head))
    conv_ratios, all_ratios, regrets = [], [], []
    errors = {("old", "cold"): [], ("old", "warm"): [], ("new", "cold"): [], ("new", "warm"): []}
    for name, convolutional, report, warm, cold, runs, default, _mixed in rows:
        times = {p: statistics.mean(a for _p, a in r) for p, r in runs.items()}
        best = min(times, key=times.get)
        agent = report.plan
        a_s = times.get(agent)
        w_s = times.get(warm.plan)
        ratio = times[default] / a_s if a_s else float("nan")
        regret = 100.0 * (a_s / times[best] - 1.0) if a_s else float("nan")
        all_ratios.append(ratio)
        regrets.append(regret)
        if convolutional:
            conv_ratios.append(ratio)
        for plan, r in runs.items():
            kind = "new" if is_new(plan) else "old"
            first = ape(cold.get(plan), r[0][1])
            if first is not None:
                errors[(kind, "cold")].append(first)
            if len(r) > 1 and ape(r[-1][0], r[-1][1]) is not None:
                errors[(kind, "warm")].append(ape(r[-1][0], r[-1][1]))
        print(
            f"{name:<12} {times[default]:6.2f} {agent.label:<40} {a_s or float('nan'):6.2f} {ratio:5.2f}x"
            f" {best.label:<40} {times[best]:6.2f} {regret:6.1f}% {warm.plan.label:<40}"
            f" {times[default] / w_s if w_s else float('nan'):5.2f}x"
        )
    print("\nevery plan, pass by pass (predicted / actual s):")
    for name, _c, _r, _w, _cold, runs, _d, _m in rows:
        for plan, r in runs.items():
            print(f"   {name:<12} {plan.label:<52} " + "  ".join(f"{p or float('nan'):.2f}/{a:.2f}" for p, a in r))
    print("\nmixed precision (`fit(job, precision='auto')`) beside the fp32 plans:")
    for name, _c, report, _w, _cold, _runs, _d, (mixed, reference) in rows:
        if mixed is None:
            print(f"   {name:<12} excluded: {bf16.reason}")
            continue
        plan, seconds, acc, loss = mixed
        print(
            f"   {name:<12} {plan.label if plan else '?':<44} {seconds:6.2f}s"
            f"  val_accuracy {fmt(acc)}  val_loss {fmt(loss)}"
            f"   | fp32 ({report.plan.label}): val_accuracy {fmt(reference[0])}  val_loss {fmt(reference[1])}"
        )

    print()
    med_conv = statistics.median(conv_ratios) if conv_ratios else float("nan")
    worst = min(all_ratios) if all_ratios else float("nan")
    med_regret = statistics.median(regrets) if regrets else float("nan")

    def verdict(ok: bool) -> str:
        return "met" if ok else "NOT met"

    print(f"D/A over the convolutional jobs: median {med_conv:.2f}x (target >= 1.25x): {verdict(med_conv >= 1.25)}")
    print(f"D/A on any job: lowest {worst:.2f}x (target >= 0.97x): {verdict(worst >= 0.97)}")
    print(
        f"regret against the best measured plan: median {med_regret:.1f} % (target <= 5 %): {verdict(med_regret <= 5)}"
    )
    for (kind, phase), values in errors.items():
        print(
            f"prediction error, {kind} plans ({'NCHW fp32' if kind == 'old' else 'channels_last / mixed'}), {phase}: "
            f"MAPE {mean_or_nan(values):.1f} % over {len(values)} runs"
        )


if __name__ == "__main__":
    main()
