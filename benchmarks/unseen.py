"""Jobs nobody tuned for: a seeded draw of user jobs the agent has never seen, each measured with
the agent deciding against PyTorch's default way and against every CPU plan forced.

    flock -x /tmp/tp-cpu.lock python benchmarks/unseen.py --seed 7 --jobs 12     # <= ~40 min on 2 cores
    flock -x /tmp/tp-cpu.lock python benchmarks/unseen.py --quick --jobs 2 --seed 7   # smoke test, ~3 min
    python benchmarks/unseen.py --seed 7 --estimate     # the drawn jobs and the time estimate; runs nothing

Run it under `flock -x /tmp/tp-cpu.lock`, alone on the machine: every figure is a wall time, and the
busy core of the loaded runs is the only load it means to measure. A run beside which other
processes still used more than a quarter of a core is set aside and measured again (twice at
most); each run's `load_met` and `others_cores` in the JSON say what else ran beside it.

The estimate printed first (runs, minutes) is checked against --budget-min (40): when over, every
job's drawn duration is scaled by one factor, never below 10 s, and a note says so.

Jobs (benchmarks/unseen_jobs.py): MLPs, CNNs with and without BatchNorm, LSTMs, Transformer
encoders on int64 tokens and regressions, with drawn widths, depths, batch sizes (8-512), data
sizes and optimizers, each written as a user writes a job file (plain torch, `make_job()` returning
`trainpilot.Job`) and run by reference, `trainpilot.fit("job_01_mlp.py:make_job")`, as
`trainpilot headless run --job` runs it. The same seed gives the same jobs. Each job is drawn a
duration of 10-40 s for PyTorch's default way (--quick: 3-5 s); its epochs (and, where one epoch
would overshoot or be tiny, its data size) are sized from a quick bare-PyTorch timing of its step.

Cold and calibrated: the machine is calibrated once (a quick calibration, as on first sight), and
each job runs in a fresh TRAINPILOT_HOME holding only that calibration, with no run recorded
(`record_history=False`): every run of a job is decided with nothing learnt of it or of any other
job. Per job, in rounds (the run order alternating, so a drift of the machine's speed favours
neither side of a pair):

  agent    `fit(job)`: the agent decides, the closed loop on (adapt on); once a round.
  default  PyTorch's default way, forced: cpu, all threads, eager, fp32, NCHW (no loader workers:
           the data are tensors): once a round. It is also the forced plan "cpu (N threads)", so
           it is not run again below.
  forced   every other plan the agent predicts that a run can be forced onto (`backend`,
           `threads`, `memory_format`; adapt off): cpu at each thread count, channels_last where
           weighed, the split plan where offered (compiled plans need a calibration of their own:
           left out). Each once, shared out over the rounds (the budget: see --budget-min).
  loaded   for a third of the jobs, after those rounds: pairs of adapt on against adapt off with a
           real busy core (machine.contention.BusyLoad, a `while` loop process) arriving at a drawn
           point of the run for a drawn 20-50 % of its steps (the same steps in both runs).

Printed per job: kind, size, batch, the agent's plan (its first decision; moves counted), the cold
prediction (the agent run's first decision's predicted time for the whole run) against its actual
time with the error, agent/default (the median of the paired speed-ups, default s / agent s, with
its 90 % bootstrap interval: benchmarks/paired.py), the regret against the best measured forced plan,
and adaptive/off for a loaded job (off s / adaptive s); then the summary and a verdict per target.
A JSON file of every run (the agent runs' trace lines included) is written; its path is printed.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "core"))
sys.path.insert(0, str(ROOT / "benchmarks"))

import unseen_report as report  # noqa: E402  (benchmarks/, beside this script)
from unseen_jobs import (  # noqa: E402
    FULL_SECONDS,
    MAX_DATA_FLOATS,
    QUICK_SECONDS,
    JobSpec,
    draw_jobs,
    sample_floats,
    write_job,
)

FULL_PAIRS, QUICK_PAIRS = 3, 2
BUDGET_MIN = 40.0
MAX_EPOCHS = 40  # more epochs than this: the data grow instead (each epoch adds a validation pass)
# What a run costs around its training steps (importing the job file and building its data,
# preparing and profiling the job, the agent's observe window, validation, checkpoints), and the
# fixed costs of a benchmark run: the estimate's figures. After each job the rest is estimated
# again at the pace the jobs so far kept against their estimate.
RUN_OVERHEAD_S = 2.0
JOB_OVERHEAD_S = 4.0  # sizing and the cold plan
CALIBRATION_S = 15.0
FORCED_SLOWER = 1.2  # a forced plan other than the default runs this much longer on average (estimate)
LOADED_SLOWER = 1.3  # a run beside the busy core
# Another engineer's process beside a run is not the state the benchmark means to time: a run that
# met more than this much of a core besides itself (and the busy core it started) is measured again.
QUIET_CORES = 0.25
RETRIES = 2


def log(started: float, text: str) -> None:
    elapsed = time.perf_counter() - started
    print(f"[unseen {int(elapsed // 60)}:{int(elapsed % 60):02d}] {text}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------- the budget


def other_plans(spec: JobSpec, cores: int) -> int:
    """Forced plans besides the default a job is expected to get on `cores` cores: each thread count
    (channels_last too for a CNN), and the split plan where no normalisation layer rules it out."""
    layouts = 2 if spec.kind in ("cnn", "cnn_bn") else 1
    split = 1 if cores >= 2 and spec.kind not in ("cnn_bn", "transformer") else 0
    return (cores + split) * layouts - 1


def runs_of(spec: JobSpec, pairs: int, cores: int) -> int:
    return 2 * pairs + other_plans(spec, cores) + (2 * pairs if spec.loaded else 0)


def estimate_s(specs: list[JobSpec], seconds: list[float], pairs: int, cores: int) -> float:
    total = CALIBRATION_S
    for spec, s in zip(specs, seconds, strict=True):
        total += JOB_OVERHEAD_S + 2 * pairs * (s + RUN_OVERHEAD_S)
        total += other_plans(spec, cores) * (FORCED_SLOWER * s + RUN_OVERHEAD_S)
        if spec.loaded:
            total += 2 * pairs * (LOADED_SLOWER * s + RUN_OVERHEAD_S)
    return total


def fit_budget(
    specs: list[JobSpec], pairs: int, cores: int, budget_s: float, floor_s: float
) -> tuple[list[float], float, float]:
    """Each job's duration: as drawn, or scaled by one factor (never below `floor_s`) so the whole
    estimate fits `budget_s`. Returns (durations, factor, estimate)."""
    drawn = [s.seconds for s in specs]

    def scaled(f: float) -> list[float]:
        return [max(min(floor_s, d), f * d) for d in drawn]

    if estimate_s(specs, drawn, pairs, cores) <= budget_s:
        return drawn, 1.0, estimate_s(specs, drawn, pairs, cores)
    low, high = 0.0, 1.0
    for _ in range(40):
        mid = (low + high) / 2
        low, high = (mid, high) if estimate_s(specs, scaled(mid), pairs, cores) <= budget_s else (low, mid)
    return scaled(low), low, estimate_s(specs, scaled(low), pairs, cores)


# ---------------------------------------------------------------- sizing


@dataclass(frozen=True)
class Sized:
    path: Path
    samples: int
    batch: int
    epochs: int
    step_s: float  # a bare PyTorch step, all threads
    expected_s: float  # the default run's training time these give, by that step


def import_job_file(path: Path, name: str) -> Any:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.make_job()


def bare_step_s(job: Any, threads: int, budget_s: float) -> float:
    """The median time of a plain PyTorch training step of `job` (its model, loss, optimizer and
    batch size) on `threads` threads: what sizes its epochs, measured apart from TrainPilot."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        torch.manual_seed(0)
        model = job.model() if not isinstance(job.model, torch.nn.Module) else job.model
        model.train()
        optimizer = job.optimizer(model.parameters())
        X, y = job.data
        b = job.batch_size
        times: list[float] = []
        start, k = time.perf_counter(), 0
        while len(times) < 40 and (len(times) < 5 or time.perf_counter() - start < budget_s):
            i = (k * b) % max(len(X) - b, 1)
            t = time.perf_counter()
            optimizer.zero_grad()
            job.loss(model(X[i : i + b]), y[i : i + b]).backward()
            optimizer.step()
            if k >= 2:  # the first steps allocate and warm up
                times.append(time.perf_counter() - t)
            k += 1
        return statistics.median(times)
    finally:
        torch.set_num_threads(before)


def size_job(spec: JobSpec, folder: Path, seconds: float, cores: int, quick: bool) -> Sized:
    """Epochs (and where needed the data size) that make the default run last about `seconds`."""
    path = write_job(spec, folder)
    step_s = bare_step_s(import_job_file(path, f"_unseen_sizing_{spec.index}"), cores, 0.3 if quick else 0.6)

    def epoch_s(samples: int) -> float:
        return math.ceil((samples - round(0.1 * samples)) / spec.batch) * step_s

    samples, cap = spec.samples, max(MAX_DATA_FLOATS // sample_floats(spec.kind, spec.shape), 4 * spec.batch)
    if epoch_s(samples) > 1.3 * seconds:  # one epoch overshoots: fewer samples, one epoch
        samples = max(4 * spec.batch, int(samples * seconds / epoch_s(samples)))
    elif seconds / epoch_s(samples) > MAX_EPOCHS:
        samples = min(cap, int(samples * seconds / epoch_s(samples) / MAX_EPOCHS))
    epochs = max(1, round(seconds / epoch_s(samples)))
    path = write_job(spec, folder, samples, epochs)
    return Sized(path, samples, spec.batch, epochs, step_s, epochs * epoch_s(samples))


# ---------------------------------------------------------------- one run


class BusyWindow:
    """A busy core (a real `while` loop process) from global step `on` to step `off` of a run:
    started and stopped at step boundaries, so two runs of a pair meet it over the same steps."""

    def __init__(self, on: int, off: int):
        self.on, self.off = on, off
        self.busy: Any = None
        self.t0 = time.perf_counter()
        self.changes: list[dict[str, Any]] = []

    def at_step(self, step: int) -> None:
        from trainpilot.machine.contention import BusyLoad

        if self.busy is None and not self.changes and step >= self.on:
            self.busy = BusyLoad(1, settle_s=0.0).__enter__()
            self.changes.append({"load": "on", "step": step, "at_s": time.perf_counter() - self.t0})
        elif self.busy is not None and step >= self.off:
            self.stop(step)

    def stop(self, step: int | None = None) -> None:
        if self.busy is not None:
            self.busy.stop()
            self.busy = None
            self.changes.append({"load": "off", "step": step, "at_s": time.perf_counter() - self.t0})


def trace_line(event: Any) -> str | None:
    """A run's event as the trace prints it with --verbose (trainpilot_tui/cli/progress.py's shape)."""
    from trainpilot import events as ev

    if isinstance(event, ev.AgentStepped):
        return f"{event.phase:>7} {event.text}"
    if isinstance(event, ev.BackendChosen):
        reason = "" if event.source == "agent" else f": {event.reason}"
        trigger = f" [trigger {event.trigger}]" if event.trigger else ""
        return f"    act train on {event.plan.label} ({event.source}{reason}){trigger}"
    if isinstance(event, ev.EpochTimed):
        pred = "n/a" if event.predicted_s is None else f"{event.predicted_s:.2f}s"
        return f"  epoch {event.epoch}: predicted {pred}, actual {event.actual_s:.2f}s on {event.plan.label}"
    if isinstance(event, ev.RunFinished):
        return f"{event.status}: {event.message}"
    return None


def fit_once(ref: str, epochs: int, variant: str, rnd: int, forced: Any = None, adapt: str = "on", load: Any = None):  # type: ignore[no-untyped-def]
    """One real run of the job `ref`, as a user's `trainpilot.fit(ref, ...)`, and what it did."""
    import trainpilot
    from trainpilot import events as ev

    trace: list[str] = []
    first: dict[str, Any] = {}
    window = BusyWindow(*load) if load else None

    def seen(event: Any) -> None:
        line = trace_line(event)
        if line is not None and forced is None:
            trace.append(line)
        if isinstance(event, ev.BackendChosen) and not first:
            first.update(plan=event.plan.label, short=event.plan.short_label, predicted_s=event.predicted_s)
        if window is not None and isinstance(event, ev.StepProgressed):
            window.at_step((event.epoch - 1) * event.steps_per_epoch + event.step)

    kwargs: dict[str, Any] = {"epochs": epochs, "record_history": False, "on_event": seen, "adapt": adapt}
    if forced is not None:
        kwargs.update(
            backend=forced.backend,
            threads=forced.threads if forced.backend == "cpu" else None,
            compile=False,
            memory_format=forced.memory_format or "contiguous",
            precision="fp32",
            adapt="off",
        )
    t = time.perf_counter()
    try:
        result = trainpilot.fit(ref, **kwargs)
    finally:
        if window is not None:
            window.stop()
    wall = time.perf_counter() - t
    data = result.to_dict()
    steps: dict[str, int] = {}
    for epoch in data.get("epochs") or []:
        for seg in epoch.get("segments") or []:
            label = trainpilot.plans.Plan.from_dict(seg["plan"]).label
            steps[label] = steps.get(label, 0) + int(seg.get("steps", 0))
    fallback = data.get("fallback_reason")
    return {
        "variant": variant,
        "round": rnd,
        "forced": forced is not None,
        "ok": result.ok and not (forced is not None and fallback),
        "status": result.status,
        "message": result.message,
        "fallback_reason": fallback,
        "actual_s": float(data.get("actual_s") or float("nan")),
        "wall_s": wall,
        "first_plan": first.get("plan", "-"),
        "first_plan_short": first.get("short", "-"),
        "predicted_s": first.get("predicted_s"),
        "final_plan": result.plan.label if result.plan else None,
        "final_plan_short": result.plan.short_label if result.plan else None,
        "steps_on": steps,
        "moves": [c for c in data.get("plan_changes") or [] if c.get("source") == "replan"],
        "load_met": data.get("load_met"),
        "busy_core": window.changes if window is not None else None,
        "params": data.get("params"),
        "trace": trace,
    }


# ---------------------------------------------------------------- one job


def forced_plans(cold: Any, cores: int) -> tuple[Any, list[Any]]:
    """(the default plan, every other plan a run can be forced onto) from the cold report."""
    from trainpilot.plans import Plan

    default = Plan("cpu", threads=cores)
    out = []
    for p in cold.plans:
        if p.get("predicted_s") is None or p.get("excluded"):
            continue
        plan = Plan.from_dict(p)
        if plan.is_compiled or plan.precision or plan.backend not in ("cpu", "split"):
            continue
        out.append(plan)
    return default, [p for p in dict.fromkeys(out) if p != default]


def rounds(pairs: int, others: list[Any]) -> list[list[Any]]:
    """The run order: each round an agent/default pair (alternating which goes first) and its share
    of the other forced plans, on the far side of the pair from the round before."""
    out = []
    for r in range(pairs):
        extra = others[r::pairs]
        out.append(["agent", "default", *extra] if r % 2 == 0 else [*extra, "default", "agent"])
    return out


def measure_job(spec: JobSpec, sized: Sized, pairs: int, cores: int, started: float, n: int) -> dict[str, Any]:
    import trainpilot

    ref = f"{sized.path}:make_job"
    job: dict[str, Any] = {
        "job": f"{spec.index:02d} {spec.kind}",
        "spec": spec.to_dict(),
        "description": spec.describe(),
        "file": str(sized.path),
        "command": f"trainpilot headless run --job {sized.path}:make_job --epochs {sized.epochs}",
        "samples": sized.samples,
        "epochs": sized.epochs,
        "bare_step_s": sized.step_s,
        "expected_default_s": sized.expected_s,
        "runs": [],
    }
    cold = trainpilot.plan(ref, epochs=sized.epochs)
    default, others = forced_plans(cold, cores)
    job["cold_plan"] = {
        "chosen": cold.chosen.get("label"),
        "plans": [
            {"label": p.get("label"), "predicted_s": p.get("predicted_s"), "excluded": p.get("excluded")}
            for p in cold.plans
        ],
    }
    job["forced_plans"] = [default.label, *(p.label for p in others)]
    job["short_labels"] = {report.DEFAULT: default.short_label, **{p.label: p.short_label for p in others}}
    order = rounds(pairs, others)
    total = sum(len(r) for r in order) + (2 * pairs if spec.loaded else 0)
    job["discarded"] = []
    done = 0

    def quiet(*args: Any, **kwargs: Any) -> dict[str, Any]:
        """A run on a machine as quiet as meant: measured again (at most RETRIES times) while other
        processes took more than QUIET_CORES of a core beside it; what was set aside stays in the JSON."""
        attempt = 0
        while True:
            run = fit_once(ref, sized.epochs, *args, **kwargs)
            run["others_cores"] = extra = others_cores(run)
            if extra <= QUIET_CORES or not run["ok"]:
                return run
            if attempt == RETRIES:
                run["noisy"] = True
                return run
            attempt += 1
            job["discarded"].append({**run, "trace": []})
            log(started, f"  other processes used {extra:.2f} core(s) beside {run['variant']}: measured again")

    for k, names in enumerate(order):
        for name in names:
            if name == "agent":
                run = quiet(report.AGENT, k)
            elif name == "default":
                run = quiet(report.DEFAULT, k, forced=default)
            else:
                run = quiet(name.label, k, forced=name)
            job["runs"].append(run)
            done += 1
            log(
                started,
                f"job {spec.index}/{n} {spec.kind}: run {done}/{total} round {k + 1} {run['variant']}:"
                f" {run['actual_s']:.1f} s on {run['first_plan_short']}"
                + (f" ({len(run['moves'])} move(s))" if run["moves"] else "")
                + ("" if run["ok"] else f" NOT USED: {run['fallback_reason'] or run['message']}"),
            )
    if spec.loaded:
        steps = total_steps(sized)
        on = max(1, round(spec.load_start * steps))
        off = max(on + 1, round((spec.load_start + spec.load_span) * steps))
        job["busy_core_steps"] = {"on": on, "off": off, "of": steps}
        for k in range(pairs):
            for variant in (report.ADAPTIVE, report.OFF) if k % 2 == 0 else (report.OFF, report.ADAPTIVE):
                adapt = "on" if variant == report.ADAPTIVE else "off"
                run = quiet(variant, pairs + k, adapt=adapt, load=(on, off))
                job["runs"].append(run)
                done += 1
                log(
                    started,
                    f"job {spec.index}/{n} {spec.kind}: run {done}/{total} loaded pair {k + 1} adapt {adapt}:"
                    f" {run['actual_s']:.1f} s"
                    + (f", moves {[m.get('trigger') for m in run['moves']]}" if run["moves"] else ""),
                )
    job["params"] = next((r["params"] for r in job["runs"] if r.get("params")), None)
    return job


def others_cores(run: dict[str, Any]) -> float:
    """Cores other processes used over a run besides the busy core the benchmark started (that one's
    share: its seconds on over the run's training seconds)."""
    met = float((run.get("load_met") or {}).get("busy_cores") or 0.0)
    changes = run.get("busy_core") or []
    if len(changes) == 2 and run["actual_s"] > 0:
        met -= min(1.0, (changes[1]["at_s"] - changes[0]["at_s"]) / run["actual_s"])
    return max(met, 0.0)


def total_steps(sized: Sized) -> int:
    """The run's steps, as the trainer counts them (10 % of the samples held out, the last batch short)."""
    return sized.epochs * math.ceil((sized.samples - round(0.1 * sized.samples)) / sized.batch)


# ---------------------------------------------------------------- main


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seed", type=int, required=True, help="the draw of jobs (printed; same seed, same jobs)")
    parser.add_argument("--jobs", type=int, default=12, help="how many jobs to draw (default 12)")
    parser.add_argument("--quick", action="store_true", help="smoke test: 2 pairs, jobs of 3-5 s")
    parser.add_argument(
        "--pairs", type=int, default=None, help=f"rounds per job (default {FULL_PAIRS}; --quick {QUICK_PAIRS})"
    )
    parser.add_argument(
        "--budget-min", type=float, default=BUDGET_MIN, help="whole run, minutes: durations shrink to fit"
    )
    parser.add_argument("--seconds", default=None, help="LOW,HIGH: draw each job's duration from this range instead")
    parser.add_argument("--loaded", type=int, default=None, help="jobs with a busy core (default: a third)")
    parser.add_argument("--dir", default=None, help="where the job files and the JSON go (default: a new temp folder)")
    parser.add_argument("--estimate", action="store_true", help="print the drawn jobs and the estimate, run nothing")
    args = parser.parse_args(argv)
    args.pairs = args.pairs or (QUICK_PAIRS if args.quick else FULL_PAIRS)
    if args.jobs < 1 or args.pairs < 1:
        parser.error("--jobs and --pairs must be at least 1")
    if args.seconds:
        low, high = (float(v) for v in args.seconds.split(","))
        args.range = (low, high)
    else:
        args.range = QUICK_SECONDS if args.quick else FULL_SECONDS
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    started = time.perf_counter()
    workdir = Path(args.dir or tempfile.mkdtemp(prefix=f"tp-unseen-{args.seed}-"))
    (workdir / "jobs").mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("TRAINPILOT_AUTO_CALIBRATE", "1")
    import torch

    from trainpilot.machine.probe import usable_cpus

    cores = usable_cpus()
    specs = draw_jobs(args.seed, args.jobs, quick=args.quick, seconds=args.range, loaded=args.loaded)
    floor_s = min(args.range[0], QUICK_SECONDS[0] if args.quick else FULL_SECONDS[0])
    durations, factor, estimate = fit_budget(specs, args.pairs, cores, 60.0 * args.budget_min, floor_s)
    notes: list[str] = []
    print(
        f"benchmarks/unseen.py --seed {args.seed} --jobs {args.jobs}{' --quick' if args.quick else ''}:"
        f" {cores} usable CPUs, torch {torch.__version__}, {args.pairs} pair(s) a job;"
        f" durations drawn {args.range[0]:g}-{args.range[1]:g} s",
        flush=True,
    )
    for spec, seconds in zip(specs, durations, strict=True):
        print(
            f"  job {spec.index:2d} {spec.kind:<11} {spec.describe()}" + (f" -> {seconds:.1f} s" if factor < 1 else "")
        )
    runs = sum(runs_of(s, args.pairs, cores) for s in specs)
    print(
        f"estimate: {runs} runs, {estimate / 60:.0f} min (budget {args.budget_min:g} min; a run costs its training"
        f" and ~{RUN_OVERHEAD_S:g} s around it)",
        flush=True,
    )
    if factor < 1.0:
        notes.append(
            f"cut to fit the {args.budget_min:g}-min budget: every job's drawn duration scaled by {factor:.2f}"
            f" (never below {floor_s:g} s); the jobs are the seed's, only their epochs are fewer"
        )
    if estimate > 60.0 * args.budget_min:
        notes.append(
            f"over budget: even with every job at {floor_s:g} s the estimate is {estimate / 60:.0f} min"
            f" (fewer --jobs or --pairs to fit {args.budget_min:g} min)"
        )
    if args.pairs < 5:
        notes.append(
            f"{args.pairs} pairs a comparison: the 90 % bootstrap interval is close to the range of the"
            f" {args.pairs} ratios, which holds the true median with"
            f" {1 - 2 / 2**args.pairs:.0%} (sign test); 5 pairs or more make it a 90 % interval"
        )
    for note in notes:
        print(f"note: {note}", flush=True)
    if args.estimate:
        return 0

    template = workdir / "calibrated-home"
    os.environ["TRAINPILOT_HOME"] = str(template)
    calibration = calibrate(started)
    jobs: list[dict[str, Any]] = []
    jobs_started = time.perf_counter()
    for spec, seconds in zip(specs, durations, strict=True):
        log(started, f"job {spec.index}/{len(specs)} {spec.kind}: {spec.describe()}")
        home = workdir / f"home-{spec.index:02d}"
        shutil.rmtree(home, ignore_errors=True)
        if (template / "calibration").exists():
            shutil.copytree(template / "calibration", home / "calibration")
        home.mkdir(parents=True, exist_ok=True)
        os.environ["TRAINPILOT_HOME"] = str(home)  # cold: this job's own home, only the calibration in it
        spec_run = replace(spec, seconds=seconds)
        try:
            sized = size_job(spec_run, workdir / "jobs", seconds, cores, args.quick)
            log(
                started,
                f"job {spec.index}: {sized.samples} samples x {sized.epochs} epoch(s), bare step"
                f" {1e3 * sized.step_s:.1f} ms: default run ~{sized.expected_s:.1f} s ({sized.path.name})",
            )
            job = measure_job(spec_run, sized, args.pairs, cores, started, len(specs))
        except Exception as exc:  # an unseen job that breaks the product is a finding: record it, go on
            job = {"job": f"{spec.index:02d} {spec.kind}", "spec": spec.to_dict(), "runs": [], "error": repr(exc)}
            log(started, f"job {spec.index} FAILED: {exc!r}")
        shutil.rmtree(home, ignore_errors=True)  # its checkpoints; the job file stays
        if not job.get("error"):
            job["figures"] = report.job_figures(job)
            print("  " + " | ".join(report.job_row(job, job["figures"])).rstrip(" |"), flush=True)
        jobs.append(job)
        k = len(jobs)
        pace = (time.perf_counter() - jobs_started) / (
            estimate_s(specs[:k], durations[:k], args.pairs, cores) - CALIBRATION_S
        )
        left = pace * (estimate_s(specs[k:], durations[k:], args.pairs, cores) - CALIBRATION_S)
        log(started, f"job {spec.index} done ({pace:.2f}x its estimate so far); the rest: ~{left / 60:.0f} min")

    elapsed = time.perf_counter() - started
    print(
        f"\nbenchmarks/unseen.py --seed {args.seed}: {len(jobs)} jobs, {elapsed / 60:.1f} min"
        f" (estimate {estimate / 60:.0f})"
    )
    measured = [j for j in jobs if not j.get("error")]
    rows = [report.job_row(j, j["figures"]) if not j.get("error") else report.job_row(j, {}) for j in jobs]
    print("\n".join(report.table(rows, report.HEAD)))
    print(report.LEGEND)
    print("\nevery forced plan, measured s (median) / cold predicted s, fastest first; the agent's runs first:")
    for j in measured:
        f, short = j["figures"], j.get("short_labels", {})
        cold = {p["label"]: p["predicted_s"] for p in j["cold_plan"]["plans"]}
        cold[report.DEFAULT] = cold.get(j["forced_plans"][0])
        plans = ", ".join(
            f"{short.get(label, label)} {s:.2f}/" + (f"{cold[label]:.2f}" if cold.get(label) else "-")
            for label, s in sorted(f["plans_s"].items(), key=lambda kv: kv[1])
        )
        agent = ", ".join(r["first_plan_short"] for r in j["runs"] if r["variant"] == report.AGENT)
        print(f"  {j['job']:<14} agent {f['agent_s']:.2f} ({agent});  {plans}")
    figures = [{**j["figures"], "job": j["job"]} for j in measured]
    totals, verdicts = report.summary(figures)
    print("\nsummary:")
    print(
        f"  agent / default: median {totals['agent_vs_default_median']:.2f}x; jobs whose interval lies wholly"
        f" below {report.INTERVAL_FLOOR}x: {totals['intervals_below_floor']}"
    )
    print(f"  regret against the best measured plan: median {totals['regret_median_pct']:.1f} %")
    print(
        f"  cold prediction error: median {totals['cold_error_median_pct']:.1f} %,"
        f" p90 {totals['cold_error_p90_pct']:.1f} %"
    )
    if totals["loaded_pairs"]:
        print(
            f"  loaded: adaptive faster than off in {totals['loaded_faster_share']:.0%} of {totals['loaded_pairs']}"
            f" pairs; worst adaptive / off time {totals['loaded_worst_time_ratio']:.3f}"
        )
    print("\ntargets:")
    print("\n".join(report.table([list(v) for v in verdicts], ["target", "measured", "verdict"])))
    failed = [j["job"] for j in jobs if j.get("error")]
    if failed:
        notes.append(f"failed, left out of the summary: {', '.join(failed)} (the JSON has the error)")
    again = sum(len(j.get("discarded", [])) for j in jobs)
    noisy = [f"{j['job']} {r['variant']}" for j in jobs for r in j["runs"] if r.get("noisy")]
    if again:
        notes.append(
            f"{again} run(s) measured again: other processes used more than {QUIET_CORES} core beside them"
            " (set aside under each job's 'discarded' in the JSON)"
        )
    if noisy:
        notes.append(f"still beside other processes after {RETRIES} retries, kept: {', '.join(noisy)}")
    for note in notes:
        print(f"note: {note}")
    out = workdir / f"unseen-seed{args.seed}.json"
    out.write_text(
        json.dumps(
            {
                "benchmark": "benchmarks/unseen.py",
                "seed": args.seed,
                "jobs_asked": args.jobs,
                "quick": args.quick,
                "pairs": args.pairs,
                "cores": cores,
                "torch": torch.__version__,
                "calibration": calibration,
                "budget_min": args.budget_min,
                "duration_factor": factor,
                "estimate_s": estimate,
                "elapsed_s": elapsed,
                "notes": notes,
                "summary": totals,
                "verdicts": [{"target": t, "measured": m, "verdict": v} for t, m, v in verdicts],
                "jobs": jobs,
            },
            indent=1,
            default=str,
        )
    )
    print(f"results (every run, the agent runs' traces): {out}")
    return 0


def calibrate(started: float) -> dict[str, Any]:
    """The machine's quick calibration, once, idle, before anything is timed (as adapt.py does)."""
    from trainpilot.predict.auto import auto_calibration_enabled

    if not auto_calibration_enabled():
        log(started, "TRAINPILOT_AUTO_CALIBRATE=0: no calibration, the agent's rule cascade decides")
        return {"calibrated": False}
    import torch

    import trainpilot
    from trainpilot.machine.contention import ExternalCpuMeter

    t = time.perf_counter()
    tiny = trainpilot.Job(lambda: torch.nn.Linear(8, 2), (torch.randn(256, 8), torch.randint(0, 2, (256,))))
    with ExternalCpuMeter() as meter:  # a busy machine while calibrating skews every prediction after
        trainpilot.plan(tiny, epochs=1)
    seconds, others = time.perf_counter() - t, meter.result.cores
    print(
        f"calibrated the cost model (quick, as on first sight) in {seconds:.0f} s; other processes used"
        f" {others:.2f} core(s) meanwhile",
        flush=True,
    )
    return {"calibrated": True, "seconds": seconds, "other_cores": others}


if __name__ == "__main__":
    sys.exit(main())
