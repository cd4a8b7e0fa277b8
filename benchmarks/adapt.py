"""Does the agent keep deciding well while a run trains? The closed loop (run/closed_loop.py,
`--adapt on`) against the static agent (`--adapt off`: its one decision before the first step) and
against every static plan, on the same work, with a real busy core that comes and goes.

    flock -x /tmp/tp-cpu.lock python benchmarks/adapt.py            # full: two jobs, ~28 min on 2 cores
    flock -x /tmp/tp-cpu.lock python benchmarks/adapt.py --quick    # one job, fewer epochs: <= 5 min
    flock -x /tmp/tp-cpu.lock python benchmarks/adapt.py --parts quiet,overhead

Run it alone on the machine (`flock -x /tmp/tp-cpu.lock`): every figure is a wall time, and the
busy core is the only load it means to measure. Each invocation works in a fresh temporary
TRAINPILOT_HOME, calibrated (TRAINPILOT_AUTO_CALIBRATE=1 unless set otherwise) before anything is timed,
and no run is recorded in the history, so every run is decided from the same knowledge.

Three parts, one table each (`--parts` picks), and a last table of every target beside its
measured figure with a verdict:

load      Two jobs of ~40 s idle on the agent's own plan (`--epochs` for longer: 18 runs of a
          minute would not fit the full version in 30 minutes): large_dense on the demo set, and
          wide_mlp (below: three 2048-wide layers on 512 synthetic features, a user's
          `trainpilot.Job`, run through `TrainingSession(config, job=job)` as `trainpilot.fit` runs
          it; the agent offers no split plan for a user's job). The busy core is a real process
          (`machine.contention.BusyLoad(1)`) started and stopped at epoch ends, so every run meets
          it on the same work, whatever its speed:
            A  busy after epoch N/3, gone after epoch 2N/3 (the run decided on an idle machine);
            B  busy from before the session starts (the run decides beside it), gone after N/3.
          Per job and schedule: the adaptive run (adapt on), the static agent (adapt off), and every
          static plan the agent predicts (`trainpilot.plan(job)`: cpu 1 thread, cpu 2 threads, the
          split plan where offered), forced onto it (`backend`, `threads`: pinned) with adapt off.
          The runs' order is reversed between schedules (and between repeats), so a drift of the
          machine's speed favours no variant in both. Per run: its training time (the sum of its
          epochs' `actual_s`: training steps only), its time in the unloaded and in the loaded
          epochs, its step rate while loaded, the plans its steps ran on, the cores other processes
          used over it (the result's `load_met`: a third of the run with the busy core, if nothing
          else ran), each move (`BackendChosen`, source "replan": trigger, plan, wall time); then
          every re-plan's reasoning and every near-tie trial's verdict. The agent's idle
          predictions are printed first: a quick calibration made beside another process can
          rank the plans wrongly, and no re-plan corrects a ranking (see the calibration line).
          Targets: while loaded, the adaptive step rate >= 2x the static agent's (schedule A; in B
          both decide beside the same busy core, so the ratio is printed, not judged); the whole
          run >= 1.2x faster than the static agent in both schedules; within 10 % of the per-phase
          oracle (for each phase, the best static plan's time in it, summed); every load change
          during training answered by a move within 3 s (wall time from BusyLoad's start or stop
          to the replan's `BackendChosen`, its move included).
quiet     The zoo's five models with adapt on and no load started, `--quiet-runs` runs each, each
          long enough (`--quiet-seconds` of training by the agent's own per-epoch prediction) that
          the watch has windows to watch. Target: no move with trigger load or pace. Moves that
          settle a near tie (trigger verify) are counted apart, with the near-tie trials started.
overhead  What watching costs: benchmarks/overhead.py's machinery (its bare PyTorch loop, its
          pinned `PilotRun`) with one session at adapt on and one at adapt off beside one bare
          loop, the three epochs of each round in rotating order, each session's epoch paired with
          the bare epoch of its round; in a fresh uncalibrated home, as overhead.py runs, so the
          pinned plan keeps the bare loop's layout. A pinned plan is never moved, but its watch
          reads the load and the pace at every step boundary: what differs is the watch.
          Target: adapt on / bare <= 1.05 (adapt off's ratio beside it).

--quick: large_dense only, 15 epochs a run, one quiet run per model, a shorter overhead part.
"""

from __future__ import annotations

import argparse
import atexit
import math
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "core"))
sys.path.insert(0, str(ROOT / "benchmarks"))

from paired import bootstrap_median  # noqa: E402  (benchmarks/paired.py, beside this script)

PARTS = ("load", "quiet", "overhead")
LOAD_JOBS = ("large_dense", "wide_mlp")
QUIET_MODELS = ("small_cnn", "wide_cnn", "large_dense", "rnn", "mlp")
# epochs per load run: ~40 s idle on the agent's plan on this 2-core machine (large_dense ~0.55 s an
# epoch on 2 threads, wide_mlp ~2 s); a run beside the busy core takes longer, and the 18 runs of the
# full version, their start-up and checkpoints included, then fit in ~24 minutes
FULL_EPOCHS = {"large_dense": 72, "wide_mlp": 21}
QUICK_EPOCHS = {"large_dense": 15, "wide_mlp": 6}
LOADED_RATE_TARGET = 2.0  # adaptive / static agent step rate while loaded (schedule A)
WHOLE_RUN_TARGET = 1.2  # static agent / adaptive training time
ORACLE_TARGET = 1.10  # adaptive / per-phase oracle
MOVE_TARGET_S = 3.0  # load change -> replan event
OVERHEAD_TARGET = 1.05  # adapt on / bare loop

ADAPTIVE, STATIC_AGENT = "adaptive", "static agent"


# ---------------------------------------------------------------- jobs


def wide_mlp(width: int = 2048) -> Any:
    """Three `width`-wide layers on 512 features: a step is a few large matrix products, which two
    threads split well on an idle machine and which wait on each other beside a busy core."""
    from torch import nn

    return nn.Sequential(
        nn.Linear(512, width),
        nn.ReLU(),
        nn.Linear(width, width),
        nn.ReLU(),
        nn.Linear(width, width),
        nn.ReLU(),
        nn.Linear(width, 10),
    )


def wide_mlp_job(samples: int = 2560, width: int = 2048) -> Any:
    """Synthetic but learnable: each class a random direction plus noise."""
    import torch

    import trainpilot

    g = torch.Generator().manual_seed(7)
    y = torch.randint(0, 10, (samples,), generator=g)
    X = torch.randn(10, 512, generator=g)[y] + 2.0 * torch.randn(samples, 512, generator=g)

    def make_model() -> Any:  # a fresh model per run; the session seeds before it builds one
        return wide_mlp(width)

    return trainpilot.Job(make_model, (X, y), metric="accuracy", batch_size=64, name="wide_mlp")


def zoo(name: str) -> Any:
    from trainpilot.job.data import resolve_dataset
    from trainpilot.job.models import ModelSpec
    from trainpilot.job.spec import zoo_job

    return zoo_job(ModelSpec.from_config(name), resolve_dataset(None), batch_size=64)


JOBS: dict[str, Any] = {"wide_mlp": wide_mlp_job}


def make_job(name: str) -> Any:
    return JOBS[name]() if name in JOBS else zoo(name)


def interval(prediction: dict[str, Any]) -> str:
    low, high = prediction.get("predicted_low_s"), prediction.get("predicted_high_s")
    return "-" if low is None or high is None else f"{low:.2f}-{high:.2f}"


def static_plans(job: Any) -> tuple[list[Any], str]:
    """Every plan the agent predicts for `job` on the machine as it is now and a run can be forced
    onto: eager CPU at each thread count, and the split plan where the agent offers it (compiled
    plans need a calibration of their own and are left out). Also a line of the predictions per
    epoch and the agent's choice."""
    import trainpilot
    from trainpilot.plans import Plan

    report = trainpilot.plan(job, epochs=1)
    predicted = [(Plan.from_dict(p), p) for p in report.plans if p["predicted_s"] is not None and not p.get("excluded")]
    kept = [
        (plan, p) for plan, p in predicted if (plan.backend == "cpu" and plan.mode is None) or plan.backend == "split"
    ]
    line = ", ".join(f"{plan.label} {p['predicted_s']:.2f} s ({interval(p)})" for plan, p in kept)
    return [plan for plan, _p in kept], f"{line}; the agent's choice: {report.plan.label}"


def session_config(job: Any, epochs: int, variant: Any) -> Any:
    """The SessionConfig `trainpilot.fit(job, ...)` builds: adapt on, adapt off, or forced onto a
    plan (the plan is then the user's: pinned, and watched by no closed loop)."""
    from trainpilot.run.config import SessionConfig, validate_config

    common = dict(model=job.title, epochs=epochs, batch_size=job.batch_size, record_history=False)
    if variant == ADAPTIVE:
        return validate_config(SessionConfig(**common, adapt="on"))
    if variant == STATIC_AGENT:
        return validate_config(SessionConfig(**common, adapt="off"))
    threads = variant.threads if variant.backend == "cpu" else None
    return validate_config(
        SessionConfig(
            **common,
            adapt="off",
            backend=variant.backend,
            threads=threads,
            memory_format=variant.memory_format or "contiguous",
        )
    )


def variant_name(variant: Any) -> str:
    return variant if isinstance(variant, str) else variant.label


# ---------------------------------------------------------------- one run


@dataclass(frozen=True)
class Schedule:
    name: str
    on: int  # the load starts at the end of this epoch (0: before the session starts)
    off: int  # and stops at the end of this one

    def loaded(self, epoch: int) -> bool:
        """Whether epoch `epoch` (1-based, as EpochTimed counts) trained beside the busy core."""
        return self.on < epoch <= self.off

    def describe(self, epochs: int) -> str:
        start = "before the session" if self.on == 0 else f"after epoch {self.on}"
        return f"busy core {start}, gone after epoch {self.off} (epochs {self.on + 1}-{self.off} of {epochs} loaded)"


def schedules(epochs: int) -> list[Schedule]:
    third = max(epochs // 3, 1)
    return [Schedule("A", third, min(2 * third, epochs - 1)), Schedule("B", 0, third)]


@dataclass
class Move:
    at_s: float  # wall seconds since the run's first plan took effect
    trigger: str | None
    plan: str
    epoch: int  # the epoch it happened in (1-based)


@dataclass
class Run:
    job: str
    schedule: Schedule
    variant: str
    first_plan: str = ""
    epochs: list[tuple[int, float, int]] = field(default_factory=list)  # (epoch, training s, steps)
    steps_by_plan: Counter[str] = field(default_factory=Counter)
    moves: list[Move] = field(default_factory=list)
    changes: list[tuple[str, float]] = field(default_factory=list)  # ("on" | "off", wall s since the first plan)
    plan_changes: list[dict[str, Any]] = field(default_factory=list)
    trials: int = 0  # near-tie trials started
    verdicts: list[str] = field(default_factory=list)  # what each near-tie trial measured and kept
    rethinks: list[str] = field(default_factory=list)  # each re-plan's reasoning, moved or not
    load_met: float | None = None  # other processes' cores over the run (the result's load_met)
    status: str = ""

    @property
    def total_s(self) -> float:
        return sum(s for _e, s, _n in self.epochs)

    def phase(self, loaded: bool) -> tuple[float, int]:
        """(training seconds, steps) of the loaded or the unloaded epochs."""
        picked = [(s, n) for e, s, n in self.epochs if self.schedule.loaded(e) == loaded]
        return sum(s for s, _ in picked), sum(n for _, n in picked)

    def latencies(self) -> list[tuple[str, float | None]]:
        """For each load change during training: the wall seconds to the first move it caused
        (trigger load or pace, before the next change), or None."""
        out: list[tuple[str, float | None]] = []
        for i, (kind, at) in enumerate(self.changes):
            if at < 0:  # the load was there before the decision: the first plan answers it
                continue
            until = self.changes[i + 1][1] if i + 1 < len(self.changes) else math.inf
            moves = [m.at_s - at for m in self.moves if at <= m.at_s < until and m.trigger in ("load", "pace")]
            out.append((kind, moves[0] if moves else None))
        return out


def train(job_name: str, variant: Any, epochs: int, schedule: Schedule | None, log: Any = None) -> Run:
    """One real session of `job_name` for `epochs` epochs, with the busy core per `schedule`."""
    from trainpilot import events as ev
    from trainpilot.machine.contention import BusyLoad
    from trainpilot.plans import Plan
    from trainpilot.run.session import TrainingSession

    job = make_job(job_name)
    run = Run(job_name, schedule or Schedule("-", epochs, epochs), variant_name(variant))
    busy: BusyLoad | None = None
    clock0: float | None = None
    before = time.perf_counter()
    if schedule is not None and schedule.on == 0:
        # there before the agent observes the machine (its 0.3 s window), as a load the run starts beside
        busy = BusyLoad(1, settle_s=0.5).__enter__()
    try:
        session = TrainingSession(session_config(job, epochs, variant), job=job)
        for event in session.events():
            now = time.perf_counter()
            if isinstance(event, ev.BackendChosen):
                if clock0 is None:
                    clock0 = now
                    run.first_plan = event.plan.label
                    if busy is not None:
                        run.changes.append(("on", before - now))
                elif event.source == "replan":
                    run.moves.append(Move(now - clock0, event.trigger, event.plan.label, len(run.epochs) + 1))
            elif isinstance(event, ev.AgentStepped) and isinstance(event.data, dict):
                if "block_steps" in event.data:
                    run.trials += 1
                elif "ratio" in event.data and event.data.get("trigger") == "verify":
                    run.verdicts.append(f"epoch {len(run.epochs) + 1}: {event.text}")
                elif event.data.get("trigger_rule") == "replan" and clock0 is not None:
                    run.rethinks.append(f"@{now - clock0:.1f}s, epoch {len(run.epochs) + 1}: {event.text}")
            elif isinstance(event, ev.EpochTimed):
                steps = sum(int(seg.get("steps", 0)) for seg in event.segments)
                run.epochs.append((event.epoch, float(event.actual_s), steps))
                for seg in event.segments:
                    run.steps_by_plan[Plan.from_dict(seg["plan"]).label] += int(seg.get("steps", 0))
                if schedule is not None and clock0 is not None:
                    if event.epoch == schedule.on and busy is None and event.epoch < schedule.off:
                        busy = BusyLoad(1, settle_s=0).__enter__()
                        run.changes.append(("on", time.perf_counter() - clock0))
                    elif event.epoch == schedule.off and busy is not None:
                        busy.stop()
                        busy = None
                        run.changes.append(("off", time.perf_counter() - clock0))
            elif isinstance(event, ev.RunFinished):
                run.status = event.status
                run.plan_changes = list(event.result.get("plan_changes", []))
                run.load_met = (event.result.get("load_met") or {}).get("busy_cores")
                if event.status != "success":
                    raise SystemExit(f"{job_name} ({run.variant}) ended {event.status}: {event.message}")
    finally:
        if busy is not None:
            busy.stop()
    if log is not None:
        log(
            f"  {job_name:<12} {run.schedule.name} {run.variant:<40} {run.total_s:6.1f} s,"
            f" {len(run.moves)} move(s)  ({time.perf_counter() - before:.0f} s with start-up)"
        )
    return run


# ---------------------------------------------------------------- output helpers


def verdict(ok: bool) -> str:
    return "met" if ok else "MISSED"


def table(rows: list[list[str]], head: list[str], right: set[int] | None = None) -> None:
    right = right or set()
    widths = [max(len(str(r[i])) for r in [head, *rows]) for i in range(len(head))]

    def line(r: list[str]) -> str:
        return "  ".join(
            str(v).rjust(w) if i in right else str(v).ljust(w) for i, (v, w) in enumerate(zip(r, widths, strict=True))
        ).rstrip()

    print(line(head))
    print("-" * len(line(head)))
    for r in rows:
        print(line(r))


def med(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def shares(counter: Counter[str]) -> str:
    total = sum(counter.values()) or 1
    return ", ".join(f"{label} {100 * n / total:.0f}%" for label, n in counter.most_common())


# ---------------------------------------------------------------- part: load


def part_load(args: argparse.Namespace) -> list[tuple[str, str, str, str, str]]:
    print("\n== load: a busy core comes and goes while the run trains ==", flush=True)
    results: list[Run] = []
    plans_of: dict[str, list[Any]] = {}
    for name in args.jobs:
        plans_of[name], predictions = static_plans(make_job(name))
        print(f"{name}: the plans it predicts per epoch, idle (80 % interval): {predictions}", flush=True)
    for name in args.jobs:
        epochs = args.epochs or (QUICK_EPOCHS if args.quick else FULL_EPOCHS)[name]
        variants: list[Any] = [ADAPTIVE, STATIC_AGENT, *plans_of[name]]
        for rep in range(args.repeats):
            for k, schedule in enumerate(schedules(epochs)):
                order = variants if (rep + k) % 2 == 0 else variants[::-1]
                print(
                    f"{name}, schedule {schedule.name}: {schedule.describe(epochs)}; order:"
                    f" {', '.join(variant_name(v) for v in order)}",
                    flush=True,
                )
                for variant in order:
                    results.append(train(name, variant, epochs, schedule, log=lambda s: print(s, flush=True)))
    return report_load(results, args.jobs)


def report_load(results: list[Run], jobs: list[str]) -> list[tuple[str, str, str, str, str]]:
    """The per-run table and the targets' verdicts (rows: target, job, schedule, measured, verdict)."""
    groups: dict[tuple[str, str, str], list[Run]] = {}
    for r in results:
        groups.setdefault((r.job, r.schedule.name, r.variant), []).append(r)

    def fig(job: str, sched: str, variant: str, what: str) -> float:
        runs = groups.get((job, sched, variant), [])
        if what == "total":
            return med([r.total_s for r in runs])
        if what == "rate":
            return med([r.phase(True)[1] / r.phase(True)[0] for r in runs if r.phase(True)[0] > 0])
        return med([r.phase(what == "loaded")[0] for r in runs])

    def order(key: tuple[str, str, str]) -> tuple[int, str, int, str]:
        job, sched, variant = key
        rank = {ADAPTIVE: 0, STATIC_AGENT: 1}.get(variant, 2)
        return (jobs.index(job) if job in jobs else len(jobs), sched, rank, variant)

    groups = dict(sorted(groups.items(), key=lambda item: order(item[0])))
    print()
    rows = []
    for (job, sched, variant), runs in groups.items():
        r0 = runs[0]
        met = [r.load_met for r in runs if r.load_met is not None]
        moves = "; ".join(f"{m.trigger}->{m.plan} @{m.at_s:.1f}s" for r in runs for m in r.moves) or "-"
        changes = ", ".join(f"{k} @{t:.1f}s" for r in runs for k, t in r.changes if t >= 0) or "-"
        rows.append(
            [
                job,
                sched,
                variant,
                r0.first_plan,
                f"{fig(job, sched, variant, 'total'):.1f}",
                f"{fig(job, sched, variant, 'unloaded'):.1f}",
                f"{fig(job, sched, variant, 'loaded'):.1f}",
                f"{fig(job, sched, variant, 'rate'):.1f}",
                shares(sum((r.steps_by_plan for r in runs), Counter())),
                f"{med(met):.2f}" if met else "-",
                changes,
                moves,
            ]
        )
    table(
        rows,
        [
            "job",
            "sched",
            "run",
            "first plan",
            "train s",
            "unloaded s",
            "loaded s",
            "loaded steps/s",
            "steps on",
            "others' cores",
            "load changes",
            "moves (trigger->plan @wall s)",
        ],
        right={4, 5, 6, 7, 9},
    )

    rethinks = [(r, t) for r in results for t in r.rethinks]
    if rethinks:
        print("\nthe adaptive runs' re-plans (load or pace changed; each says whether a move pays):")
        for r, text in rethinks:
            print(f"  {r.job} {r.schedule.name} {text}")
    trials = [(r, v) for r in results for v in r.verdicts]
    if trials:
        print("\nnear-tie trials (on the run's own steps):")
        for r, text in trials:
            print(f"  {r.job} {r.schedule.name} {r.variant}, {text}")
    verdicts: list[tuple[str, str, str, str, str]] = []
    print()
    for job in jobs:
        for sched in sorted({s for j, s, _v in groups if j == job}):
            statics = [v for j, s, v in groups if j == job and s == sched and v not in (ADAPTIVE, STATIC_AGENT)]
            a_rate, s_rate = fig(job, sched, ADAPTIVE, "rate"), fig(job, sched, STATIC_AGENT, "rate")
            rate_ratio = a_rate / s_rate if s_rate else float("nan")
            if sched == "A":
                verdicts.append(
                    (
                        f"loaded step rate adaptive / static agent >= {LOADED_RATE_TARGET:.1f}x",
                        job,
                        sched,
                        f"{rate_ratio:.2f}x ({a_rate:.1f} vs {s_rate:.1f} steps/s)",
                        verdict(rate_ratio >= LOADED_RATE_TARGET),
                    )
                )
            else:
                verdicts.append(
                    (
                        "loaded step rate adaptive / static agent (both decided under the load)",
                        job,
                        sched,
                        f"{rate_ratio:.2f}x ({a_rate:.1f} vs {s_rate:.1f} steps/s)",
                        "not judged",
                    )
                )
            a_total, s_total = fig(job, sched, ADAPTIVE, "total"), fig(job, sched, STATIC_AGENT, "total")
            speedup = s_total / a_total if a_total else float("nan")
            verdicts.append(
                (
                    f"whole run static agent / adaptive >= {WHOLE_RUN_TARGET:.1f}x",
                    job,
                    sched,
                    f"{speedup:.2f}x ({s_total:.1f} vs {a_total:.1f} s)",
                    verdict(speedup >= WHOLE_RUN_TARGET),
                )
            )
            if statics:
                best = {
                    phase: min(statics, key=lambda v: fig(job, sched, v, phase)) for phase in ("unloaded", "loaded")
                }
                oracle = sum(fig(job, sched, best[p], p) for p in best)
                gap = a_total / oracle if oracle else float("nan")
                verdicts.append(
                    (
                        f"adaptive / per-phase oracle <= {ORACLE_TARGET:.2f}",
                        job,
                        sched,
                        f"{gap:.3f} ({a_total:.1f} vs {oracle:.1f} s: unloaded {best['unloaded']},"
                        f" loaded {best['loaded']})",
                        verdict(gap <= ORACLE_TARGET),
                    )
                )
            lat = [(k, s) for r in groups.get((job, sched, ADAPTIVE), []) for k, s in r.latencies()]
            if lat:
                text = ", ".join(f"load {k}: {'no move' if s is None else f'{s:.1f} s'}" for k, s in lat)
                ok = all(s is not None and s <= MOVE_TARGET_S for _k, s in lat)
                verdicts.append(
                    (f"each load change answered by a move within {MOVE_TARGET_S:.0f} s", job, sched, text, verdict(ok))
                )
    return verdicts


# ---------------------------------------------------------------- part: quiet


def part_quiet(args: argparse.Namespace) -> list[tuple[str, str, str, str, str]]:
    import trainpilot

    print("\n== quiet: adapt on, no load started ==", flush=True)
    rows, load_moves, verify_moves, trials, runs = [], 0, 0, 0, 0
    for name in args.quiet_models:
        report = trainpilot.plan(make_job(name), epochs=1)
        per_epoch = report.chosen.get("per_epoch_s") or report.chosen.get("predicted_s") or 1.0
        epochs = max(2, min(400, math.ceil(args.quiet_seconds / max(float(per_epoch), 1e-3))))
        for k in range(args.quiet_runs):
            run = train(name, ADAPTIVE, epochs, None)
            triggers = Counter(c.get("trigger") for c in run.plan_changes if c.get("source") == "replan")
            lp, ver = triggers["load"] + triggers["pace"], triggers["verify"]
            load_moves, verify_moves, trials, runs = load_moves + lp, verify_moves + ver, trials + run.trials, runs + 1
            rows.append(
                [
                    name,
                    str(k + 1),
                    str(epochs),
                    f"{run.total_s:.1f}",
                    run.first_plan,
                    str(lp),
                    str(ver),
                    str(run.trials),
                    shares(run.steps_by_plan),
                ]
            )
            print(
                f"  {name:<12} run {k + 1}: {epochs} epochs, {run.total_s:.1f} s, {lp} load/pace, {ver} verify move(s)",
                flush=True,
            )
    print()
    table(
        rows,
        [
            "model",
            "run",
            "epochs",
            "train s",
            "first plan",
            "load/pace moves",
            "verify moves",
            "near-tie trials",
            "steps on",
        ],
        right={1, 2, 3, 5, 6, 7},
    )
    return [
        (
            "moves with trigger load or pace, no load started = 0",
            "zoo (5)",
            "-",
            f"{load_moves} in {runs} runs",
            verdict(load_moves == 0),
        ),
        (
            "moves with trigger verify (near ties settled on the run's steps)",
            "zoo (5)",
            "-",
            f"{verify_moves} in {runs} runs ({trials} trial(s) started)",
            "reported",
        ),
    ]


# ---------------------------------------------------------------- part: overhead


def part_overhead(args: argparse.Namespace) -> list[tuple[str, str, str, str, str]]:
    from trainpilot.machine.probe import usable_cpus

    threads = args.overhead_threads or usable_cpus()
    # As overhead.py measures: a fresh home, not calibrated, so the pinned plan keeps PyTorch's layout
    # (a calibrated agent may pick channels_last for a CNN, which the bare loop does not run)
    saved = {k: os.environ.get(k) for k in ("TRAINPILOT_HOME", "TRAINPILOT_AUTO_CALIBRATE")}
    os.environ["TRAINPILOT_HOME"] = tempfile.mkdtemp(prefix="tp-adapt-overhead-")
    os.environ["TRAINPILOT_AUTO_CALIBRATE"] = "0"
    atexit.register(shutil.rmtree, os.environ["TRAINPILOT_HOME"], True)
    try:
        return overhead_rounds(args, threads)
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def overhead_rounds(args: argparse.Namespace, threads: int) -> list[tuple[str, str, str, str, str]]:
    import overhead  # benchmarks/overhead.py: its bare loop and its pinned session

    from trainpilot.job.data import demo_dataset
    from trainpilot.job.models import build_model
    from trainpilot.job.prepare import seed_everything

    print(
        f"\n== overhead: {args.overhead_model}, {threads} thread(s), bare loop vs TrainPilot adapt on vs adapt off,"
        f" {args.overhead_repeats} run(s) of {args.overhead_epochs} epochs, the first of each not counted ==",
        flush=True,
    )
    seed, lr, batch = 0, 1e-3, 64
    dataset = demo_dataset(args.overhead_samples)
    train_set, val_set = dataset.split(0.1, seed)
    on: list[tuple[float, float]] = []  # (bare, pilot) pairs
    off: list[tuple[float, float]] = []
    for rep in range(args.overhead_repeats):
        pilots = {
            mode: overhead.PilotRun(
                dataset,
                model=args.overhead_model,
                epochs=args.overhead_epochs,
                batch_size=batch,
                lr=lr,
                threads=threads,
                seed=seed,
                adapt=mode,
            )
            for mode in ("on", "off")
        }
        seed_everything(seed)
        loop = overhead.BareLoop(
            build_model(args.overhead_model, dataset.sample_shape, dataset.num_classes),
            train_set,
            val_set,
            batch_size=batch,
            lr=lr,
            threads=threads,
            seed=seed,
        )
        if rep == 0:
            print(
                f"  the sessions' plan: {pilots['on'].session.plan.label};"
                f" the bare loop: {threads} thread(s), NCHW, fp32",
                flush=True,
            )
        steps: list[tuple[str, Any]] = [("bare", loop.epoch), ("on", pilots["on"].epoch), ("off", pilots["off"].epoch)]
        for epoch in range(args.overhead_epochs):
            k = (rep + epoch) % 3
            times = {name: fn() for name, fn in steps[k:] + steps[:k]}  # rotating order: drift cancels
            if epoch:
                on.append((times["bare"], times["on"]))
                off.append((times["bare"], times["off"]))
            print(
                f"  run {rep + 1} epoch {epoch + 1}: bare {times['bare'] * 1e3:.0f} ms,"
                f" adapt on {times['on'] * 1e3:.0f} ms,"
                f" adapt off {times['off'] * 1e3:.0f} ms" + ("" if epoch else " (warm-up)"),
                flush=True,
            )
        for pilot in pilots.values():
            pilot.finish()
    rows, out = [], {}
    for mode, pairs in (("on", on), ("off", off)):
        ratios = [p / b for b, p in pairs]
        low, high = bootstrap_median(ratios)
        out[mode] = statistics.median(ratios)
        rows.append(
            [
                f"adapt {mode}",
                f"{med([b for b, _ in pairs]) * 1e3:.1f}",
                f"{med([p for _, p in pairs]) * 1e3:.1f}",
                f"{out[mode]:.3f}",
                f"{low:.3f}-{high:.3f}",
                str(len(ratios)),
            ]
        )
    on_off = statistics.median([a[1] / b[1] for a, b in zip(on, off, strict=True)])
    print()
    table(
        rows,
        ["TrainPilot", "bare ms/epoch", "TrainPilot ms/epoch", "ratio", "90 % interval", "pairs"],
        right={1, 2, 3, 5},
    )
    print(f"adapt on / adapt off, same rounds: {on_off:.3f}")
    return [
        (
            f"epoch adapt on / bare loop <= {OVERHEAD_TARGET:.2f}",
            args.overhead_model,
            "-",
            f"{out['on']:.3f} (adapt off: {out['off']:.3f})",
            verdict(out["on"] <= OVERHEAD_TARGET),
        ),
    ]


# ---------------------------------------------------------------- main


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="one job, fewer epochs, one run each: <= 5 min")
    parser.add_argument("--parts", default=",".join(PARTS), help=f"comma-separated, of {', '.join(PARTS)}")
    parser.add_argument(
        "--jobs", default=None, help=f"load part's jobs (default {','.join(LOAD_JOBS)}; --quick: large_dense)"
    )
    parser.add_argument(
        "--epochs",
        type=int,
        default=None,
        help="epochs per load run (default: ~40 s idle; --quick: 15 of large_dense)",
    )
    parser.add_argument(
        "--repeats", type=int, default=1, help="load runs of each variant per schedule (medians printed)"
    )
    parser.add_argument("--quiet-models", default=",".join(QUIET_MODELS))
    parser.add_argument("--quiet-runs", type=int, default=None, help="runs per model (default 2; --quick 1)")
    parser.add_argument(
        "--quiet-seconds",
        type=float,
        default=None,
        help="least predicted training time of a quiet run (default 6; --quick 5)",
    )
    parser.add_argument("--overhead-model", default="small_cnn")
    parser.add_argument("--overhead-samples", type=int, default=2400)
    parser.add_argument("--overhead-epochs", type=int, default=None, help="epochs per run (default 12; --quick 5)")
    parser.add_argument("--overhead-repeats", type=int, default=None, help="runs (default 3; --quick 1)")
    parser.add_argument("--overhead-threads", type=int, default=None, help="default: all usable CPUs")
    args = parser.parse_args(argv)
    args.parts = [p for p in args.parts.split(",") if p]
    if not args.parts or any(p not in PARTS for p in args.parts):
        parser.error(f"--parts takes a comma-separated list of {', '.join(PARTS)}")
    args.jobs = args.jobs.split(",") if args.jobs else (["large_dense"] if args.quick else list(LOAD_JOBS))
    args.quiet_models = args.quiet_models.split(",")
    args.quiet_runs = args.quiet_runs or (1 if args.quick else 2)
    args.quiet_seconds = args.quiet_seconds or (5.0 if args.quick else 6.0)
    args.overhead_epochs = args.overhead_epochs or (5 if args.quick else 12)
    args.overhead_repeats = args.overhead_repeats or (1 if args.quick else 3)
    if (args.epochs is not None and args.epochs < 3) or args.repeats < 1 or args.overhead_epochs < 2:
        parser.error("--epochs must be at least 3, --repeats at least 1, --overhead-epochs at least 2")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    os.environ["TRAINPILOT_HOME"] = tempfile.mkdtemp(prefix="tp-adapt-")  # never the user's history
    atexit.register(shutil.rmtree, os.environ["TRAINPILOT_HOME"], True)
    os.environ.setdefault("TRAINPILOT_AUTO_CALIBRATE", "1")
    started = time.perf_counter()
    import torch

    from trainpilot.machine.probe import usable_cpus

    print(
        f"benchmarks/adapt.py{' --quick' if args.quick else ''}: parts {','.join(args.parts)};"
        f" {usable_cpus()} usable CPUs,"
        f" torch {torch.__version__}, TRAINPILOT_HOME={os.environ['TRAINPILOT_HOME']}"
        f" (auto-calibrate {os.environ['TRAINPILOT_AUTO_CALIBRATE']})",
        flush=True,
    )
    if os.environ["TRAINPILOT_AUTO_CALIBRATE"] not in ("0", "false", "no", "off"):
        # calibrate idle, before anything is timed or loaded (the first plan() would, beside a busy core in B)
        import trainpilot
        from trainpilot.machine.contention import ExternalCpuMeter

        t = time.perf_counter()
        with ExternalCpuMeter() as meter:  # a busy machine while calibrating skews every prediction after
            trainpilot.plan(make_job("mlp"), epochs=1)
        print(
            f"calibrated the cost model (quick, as on first sight) in {time.perf_counter() - t:.0f} s;"
            f" other processes used {meter.result.cores:.2f} core(s) meanwhile",
            flush=True,
        )
    verdicts: list[tuple[str, str, str, str, str]] = []
    for part in args.parts:
        verdicts += {"load": part_load, "quiet": part_quiet, "overhead": part_overhead}[part](args)
    print("\n== targets ==")
    table([list(v) for v in verdicts], ["target", "job", "sched", "measured", "verdict"])
    print(f"\nbenchmarks/adapt.py: {time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
