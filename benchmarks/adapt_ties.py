"""Near ties, settled on the run's own steps: the agent with its closed loop (`adapt="on"`, the
default) against PyTorch's default way, on the jobs of plan_vs_default.py, each run long enough
(>= --seconds) for the loop to verify a near tie. One run, a table.

    flock -x /tmp/tp-cpu.lock python benchmarks/adapt_ties.py                  # alone: it times
    python benchmarks/adapt_ties.py --jobs mlp,regression --seconds 5          # a quick look

For each job, in a fresh TRAINPILOT_HOME calibrated on first sight (as a user's first run is):

  length   one epoch of D, PyTorch's default way (eager, all threads, NCHW, fp32, num_workers=0),
           sets the epochs so that D's run lasts about --seconds;
  plan     `trainpilot.plan(job)`: the agent's cold choice A and its runner-up R (the fastest other
           plan by prediction: the one a near tie is about);
  measure  the agent itself (`trainpilot.fit(job)`, adapt on: it decides, verifies, keeps) and the
           static plans D, A and R (each forced, so pinned), in one order, reversed on every other
           job, so the machine's drift does not favour one side.

Printed per job: D's time, the adaptive run's, D/adaptive, the best static plan measured and the
adaptive run's regret against it (adaptive / best - 1; negative: faster than every static plan),
and what the loop did (its plan changes and triggers). Then the verdicts of issue 38: D/adaptive
>= 0.98x on every job, median regret <= 2 %, median D/adaptive >= 1.3x over the convolutional jobs.
The best static plan is the best of D, A and R at full length: the plans within the noise of the
choice; plan_vs_default.py measures every plan at a shorter length.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "core"))
sys.path.insert(0, str(ROOT / "benchmarks"))

from plan_vs_default import BYO_JOBS, ZOO_JOBS, fit_on, make_job  # noqa: E402

MAX_EPOCHS = 400


def epochs_for(name: str, default, seconds: float) -> int:  # type: ignore[no-untyped-def]
    """Epochs that make D's run last about `seconds` (from one epoch of D, not recorded)."""
    import trainpilot

    job = make_job(name)
    result = trainpilot.fit(
        job,
        epochs=2,
        threads=default.threads,
        workers=0 if _loads(job) else None,
        memory_format="contiguous",
        record_history=False,
    )
    per_epoch = float(result.to_dict()["epochs"][-1]["actual_s"])
    return max(2, min(MAX_EPOCHS, math.ceil(seconds / max(per_epoch, 1e-3))))


def _loads(job) -> bool:  # type: ignore[no-untyped-def]
    from torch.utils.data import Dataset

    return isinstance(job.data, Dataset)


def runner_up(report):  # type: ignore[no-untyped-def]
    from trainpilot.plans import Plan

    timed = [
        (Plan.from_dict(p), p["predicted_s"])
        for p in report.plans
        if p["predicted_s"] is not None and not p["chosen"] and not Plan.from_dict(p).is_compiled
    ]
    return min(timed, key=lambda t: t[1])[0] if timed else None


def what_the_loop_did(result) -> str:  # type: ignore[no-untyped-def]
    changes = [c for c in result.to_dict()["plan_changes"] if c["source"] == "replan"]
    if not changes:
        return "no move"
    from trainpilot.plans import Plan

    return "; ".join(f"{c['trigger']} -> {Plan.from_dict(c['plan']).label}" for c in changes)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--jobs", default=",".join(ZOO_JOBS + BYO_JOBS))
    parser.add_argument("--seconds", type=float, default=20.0, help="the length of D's run, about (default 20)")
    parser.add_argument("--home", help="TRAINPILOT_HOME to use (default: a fresh temporary one)")
    args = parser.parse_args()
    os.environ["TRAINPILOT_HOME"] = args.home or tempfile.mkdtemp(prefix="tp-ties-")
    os.environ.setdefault("TRAINPILOT_AUTO_CALIBRATE", "1")

    import trainpilot
    from trainpilot.machine.precision_support import cpu_vector_isa
    from trainpilot.machine.probe import usable_cpus
    from trainpilot.plans import Plan

    cores = usable_cpus()
    default = Plan("cpu", threads=cores)
    print(
        f"TRAINPILOT_HOME={os.environ['TRAINPILOT_HOME']}  cores={cores}  seconds={args.seconds}  cpu={cpu_vector_isa()}",
        flush=True,
    )
    started = time.perf_counter()
    rows = []
    for k, name in enumerate(args.jobs.split(",")):
        epochs = epochs_for(name, default, args.seconds)
        report = trainpilot.plan(make_job(name), epochs=epochs)
        chosen, second = report.plan, runner_up(report)
        convolutional = any(Plan.from_dict(p).memory_format for p in report.plans)
        statics = list(dict.fromkeys(p for p in (default, chosen, second) if p is not None))
        order: list[Plan | None] = [None, *statics]  # None: the agent itself, adapting
        times: dict[Plan | None, float] = {}
        adaptive = None
        for plan in order if k % 2 == 0 else list(reversed(order)):
            result = fit_on(name, plan, epochs)
            times[plan] = float(result.actual_s)
            if plan is None:
                adaptive = result
        assert adaptive is not None
        best = min(statics, key=lambda p: times[p])
        ratio = times[default] / times[None]
        regret = 100.0 * (times[None] / times[best] - 1.0)
        rows.append((name, convolutional, epochs, times, best, ratio, regret, chosen, second, adaptive))
        print(
            f"  {name}: {epochs} epochs, D {times[default]:.2f}s, adaptive {times[None]:.2f}s ({ratio:.2f}x),"
            f" best static {best.label} {times[best]:.2f}s, regret {regret:+.1f} %; {what_the_loop_did(adaptive)}"
            f" ({time.perf_counter() - started:.0f}s so far)",
            flush=True,
        )

    print(f"\nbenchmarks/adapt_ties.py: {len(rows)} jobs, {time.perf_counter() - started:.0f} s")
    head = (
        f"{'job':<12} {'ep':>4} {'D s':>6} {'adapt s':>7} {'D/adapt':>7} {'best static':<34} {'best s':>6}"
        f" {'regret':>7}  {'cold choice A / runner-up R':<44} what the loop did"
    )
    print(head)
    print("-" * len(head))
    for name, _conv, epochs, times, best, ratio, regret, chosen, second, adaptive in rows:
        pair = f"{chosen.label} / {second.label if second else '-'}"
        print(
            f"{name:<12} {epochs:>4} {times[default]:6.2f} {times[None]:7.2f} {ratio:6.2f}x {best.label:<34}"
            f" {times[best]:6.2f} {regret:+6.1f}%  {pair:<44} {what_the_loop_did(adaptive)}"
        )
    ratios = [r[5] for r in rows]
    regrets = [r[6] for r in rows]
    conv = [r[5] for r in rows if r[1]]
    worst = min(ratios) if ratios else float("nan")
    med_regret = statistics.median(regrets) if regrets else float("nan")
    med_conv = statistics.median(conv) if conv else float("nan")

    def verdict(ok: bool) -> str:
        return "met" if ok else "NOT met"

    print()
    print(f"D/adaptive on every job: lowest {worst:.2f}x (target >= 0.98x): {verdict(worst >= 0.98)}")
    print(f"regret against the best static plan: median {med_regret:+.1f} % (target <= 2 %): {verdict(med_regret <= 2)}")
    print(f"D/adaptive over the convolutional jobs: median {med_conv:.2f}x (target >= 1.3x): {verdict(med_conv >= 1.3)}")


if __name__ == "__main__":
    main()
