"""How much does the terminal app slow training down? The same job headless (the session's events
iterated, as `trainpilot headless run` does) and under the Textual app (live hardware sampling at
the app's default rate, every panel drawing), compared on the training time the core measures.

    python benchmarks/tui_overhead.py --all                   # every zoo model at the plan the agent picks, one table (15-25 min here)
    python benchmarks/tui_overhead.py --model mlp --threads 2 # one model at a fixed plan
    python benchmarks/tui_overhead.py --all --repeats 10      # at least 10 pairs instead of 6

Every run is a fresh process, as a user's `trainpilot headless run` or `trainpilot-tui` is: in one
process, the OpenMP thread team of one mode's training thread stays behind and slows the other's
(libgomp stops spinning when it manages more threads than there are cores). The first epoch is a
warm-up neither mode is charged for; the rest are compared. With --all both modes start from the
same quick calibration and record no history, so each agent decides from what it observes: the
headless one an idle machine, the app's one the machine with its own UI running (ui_cores).

The app runs under Textual's headless driver (App.run_test): it lays out and renders every frame
to terminal output as it would on screen; only the final write to a terminal is skipped. Printed
per model: each mode's plan and training time, the UI's own load during the run, and the ratio
app / headless (target: at most 1.05) with its 90 % interval, the last line the worst ratio.

How many pairs: on this shared 2-core machine one pair's ratio lands anywhere in 0.9-1.15 on a
noisy hour (large_dense once: 0.77-1.41 over 16 pairs), while the app's cost is a few per cent. So
each model starts with --repeats pairs, and one whose ratio's 90 % interval still holds the target
gets more, two at a time (one ABBA block), up to --max-repeats: the time goes to the models whose
side of the target is in doubt, and a model still in doubt at the end is marked so.
"""
from __future__ import annotations

import argparse
import atexit
import asyncio
import json
import math
import os
import statistics
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from paired import bootstrap_median

ROOT = Path(__file__).resolve().parents[1]
TARGET = 1.05


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--all", action="store_true", help="every zoo model, each mode at the plan its agent picks")
    parser.add_argument("--model", default="small_cnn")
    parser.add_argument("--epochs", type=int, default=4, help="epochs per run; the first is a warm-up, not compared")
    parser.add_argument("--min-train-s", type=float, default=3.0,
                        help="more epochs for a model whose compared epochs take less than this headless (0: always --epochs)")
    parser.add_argument("--samples", type=int, default=9600, help="size of the demo set (4x the bundled 2,400: epochs of seconds, as real ones are)")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--threads", type=int, default=None, help="a fixed CPU plan for both modes (without --all; default: the agent decides)")
    parser.add_argument("--refresh-hz", type=float, default=None, help="hardware sampling rate of the app, kept whatever the plan (default: the app's own, 1 Hz, halved while the plan holds every core)")
    parser.add_argument("--size", default="160x48", help="terminal size the app lays out for, WxH")
    parser.add_argument("--settle-s", type=float, default=None, help="the app's settle time before the run starts (default: the app's own; 0: start at once, as before)")
    parser.add_argument("--in-thread", action="store_true",
                        help="run the app's session in a thread of the app, as before it had a process of its own (for comparison)")
    parser.add_argument("--repeats", type=int, default=6,
                        help="runs of each mode, in pairs, headless first and app first in turn; the median of the pairs' ratios is compared (default 6)")
    parser.add_argument("--max-repeats", type=int, default=16,
                        help="more pairs, two at a time, for a model whose ratio's 90 %% interval still holds the target"
                             " after --repeats, up to this many (default 16; --max-repeats 0: exactly --repeats)")
    parser.add_argument("--child", choices=("headless", "tui"), help=argparse.SUPPRESS)
    return parser.parse_args(argv)


# ---------------------------------------------------------------- one run (a child process)


def config_for(args: argparse.Namespace) -> Any:
    from trainpilot.run.session import SessionConfig

    # no history: neither mode's run changes what the other's agent decides
    if args.threads:
        return SessionConfig(model=args.model, epochs=args.epochs, batch_size=args.batch_size, backend="cpu", threads=args.threads, record_history=False)
    return SessionConfig(model=args.model, epochs=args.epochs, batch_size=args.batch_size, record_history=False)


def headless_run(config: Any, dataset: Any) -> Any:
    from trainpilot.run.session import TrainingSession

    session = TrainingSession(config, dataset=dataset)
    for _event in session.events():
        pass
    return session, {}


def tui_run(config: Any, dataset: Any, refresh_hz: float | None, size: tuple[int, int], settle_s: float | None = None,
            in_thread: bool = False) -> Any:
    from trainpilot.run.session import TrainingSession
    from trainpilot.run.process import ProcessSession
    from trainpilot_tui.app import TrainPilotApp

    sessions: list[Any] = []

    def factory(cfg: Any) -> Any:  # as the app's own factory: in a process of its own, unless --in-thread
        sessions.append(TrainingSession(cfg, dataset=dataset) if in_thread else ProcessSession(cfg, dataset=dataset))
        return sessions[-1]

    options = {} if settle_s is None else {"settle_s": settle_s}
    if refresh_hz is not None:
        options["refresh_hz"] = refresh_hz
    app = TrainPilotApp(config, session_factory=factory, discover_user_themes=False, **options)
    frames = 0

    async def drive() -> tuple[float, float]:
        nonlocal frames
        original = app._display

        def counting(*a: Any, **k: Any) -> Any:  # count the frames the app renders
            nonlocal frames
            frames += 1
            return original(*a, **k)

        app._display = counting  # type: ignore[method-assign]
        async with app.run_test(size=size):
            while app.main.run_panel.progress is None and not (sessions and sessions[-1].finished):
                await asyncio.sleep(0.05)  # startup: the app composes while the session loads
            start, cpu = time.perf_counter(), time.thread_time()  # from the first step shown on
            while not (sessions and sessions[-1].finished is not None and not app.running):
                await asyncio.sleep(0.25)  # a plain sleep: polling the pilot would add main-thread work
            return time.perf_counter() - start, time.thread_time() - cpu

    wall, app_cpu = asyncio.run(drive())
    return sessions[-1], {"frames": frames, "app_thread_cores": app_cpu / wall if wall > 0 else 0.0, "wall_s": wall}


def child(args: argparse.Namespace) -> int:
    from trainpilot.job.data import demo_dataset

    dataset = demo_dataset(args.samples)
    width, height = (int(v) for v in args.size.lower().split("x"))
    if args.child == "tui":
        session, extra = tui_run(config_for(args), dataset, args.refresh_hz, (width, height), args.settle_s, args.in_thread)
    else:
        session, extra = headless_run(config_for(args), dataset)
    finished = session.finished
    if finished is None or finished.status != "success":
        print(f"error: the {args.child} run did not succeed: {finished.message if finished else 'no result'}", file=sys.stderr)
        return 1
    result = finished.result
    observed = next((c for c in result["plan_changes"]), {})
    epochs = [e["actual_s"] for e in result["epochs"]]
    out = {
        "plan": result["plan"],
        "train_s": sum(epochs[1:]) if len(epochs) > 1 else sum(epochs),  # the first epoch warms up
        "epochs_s": epochs,
        "ui_cores": result.get("load_met", {}).get("ui_cores"),
        "busy_cores": result.get("load_met", {}).get("busy_cores"),
        "source": observed.get("source"),
        **extra,
    }
    print("RESULT " + json.dumps(out))
    return 0


# ---------------------------------------------------------------- the parent: runs and the table


def run_child(mode: str, args: argparse.Namespace, model: str, threads: int | None, epochs: int | None = None) -> dict[str, Any]:
    cmd = [sys.executable, __file__, "--child", mode, "--model", model, "--epochs", str(epochs or args.epochs), "--samples", str(args.samples),
           "--batch-size", str(args.batch_size), "--size", args.size]
    if args.refresh_hz is not None:
        cmd += ["--refresh-hz", str(args.refresh_hz)]
    if threads:
        cmd += ["--threads", str(threads)]
    if args.settle_s is not None:
        cmd += ["--settle-s", str(args.settle_s)]
    if args.in_thread:
        cmd += ["--in-thread"]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT / "core"), str(ROOT), os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=900)
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")), None)
    if proc.returncode != 0 or line is None:
        raise SystemExit(f"error: {mode} run of {model} failed: {(proc.stderr.strip().splitlines() or ['no output'])[-1]}")
    return json.loads(line[len("RESULT "):])


def label(plan: dict[str, Any]) -> str:
    from trainpilot.plans import Plan

    return Plan.from_dict(plan).label


def epochs_for(args: argparse.Namespace, model: str, threads: int | None) -> int:
    """--epochs, or more when the compared epochs of one headless probe run take under
    --min-train-s: mlp's epochs take ~0.1 s here, and a window of 0.3 s compares whether one of
    the app's repaints fell inside it rather than what the app costs a run."""
    if args.min_train_s <= 0:
        return args.epochs
    probe = run_child("headless", args, model, threads)
    per_epoch = probe["train_s"] / max(args.epochs - 1, 1)
    return max(args.epochs, math.ceil(args.min_train_s / per_epoch) + 1) if per_epoch > 0 else args.epochs


def holds_target(interval: tuple[float, float]) -> bool:
    """Whether a 90 % interval still holds the target on both sides."""
    low, high = interval
    return low <= TARGET < high


def undecided(pairs: list[float]) -> bool:
    """Whether the 90 % interval of the pairs' median still holds the target."""
    return holds_target(bootstrap_median(pairs))


def measure(args: argparse.Namespace, model: str, threads: int | None, log: Any = None) -> dict[str, Any]:
    epochs = epochs_for(args, model, threads)
    runs: dict[str, list[dict[str, Any]]] = {"headless": [], "tui": []}

    def pairs() -> list[float]:
        # Each app run against the headless run of its pair: a slow stretch of a shared machine that
        # covers both cancels out of their ratio, where it would stay in a ratio of medians taken apart.
        return [t["train_s"] / h["train_s"] for h, t in zip(runs["headless"], runs["tui"])]

    i, least = 0, max(1, args.repeats)
    # more pairs two at a time (one ABBA block), while the interval cannot tell the model's side of the target
    while i < least or (i > least and i % 2 == 1) or (i < args.max_repeats and undecided(pairs())):
        if i == least and log is not None:
            low, high = bootstrap_median(pairs())
            log(f"  {model}: app/headless {statistics.median(pairs()):.3f}, 90 % interval {low:.3f}-{high:.3f} holds"
                f" {TARGET:.2f}: more pairs (at most {args.max_repeats})")
        # Interleaved, so a slow minute of a shared machine hits both, and in turn headless first,
        # then the app first (ABBA): always running the app second charged it with any steady
        # drift of the machine's speed.
        for mode in (("headless", "tui") if i % 2 == 0 else ("tui", "headless")):
            runs[mode].append(run_child(mode, args, model, threads, epochs))
        i += 1
    out: dict[str, Any] = {"epochs": epochs}
    for mode, rs in runs.items():
        plans = {label(r["plan"]) for r in rs}
        out[mode] = {"plan": " / ".join(sorted(plans)), "train_s": statistics.median(r["train_s"] for r in rs),
                     "ui_cores": statistics.median((r["ui_cores"] or 0.0) for r in rs),
                     "app_thread_cores": statistics.median(r.get("app_thread_cores", 0.0) for r in rs)}
    out["pairs"] = pairs()
    out["ratio"] = statistics.median(out["pairs"])
    out["interval"] = bootstrap_median(out["pairs"])
    out["undecided"] = holds_target(out["interval"])
    # the machine's own noise in the same minutes: how far apart the same headless run came out
    headless = [r["train_s"] for r in runs["headless"]]
    out["noise"] = max(headless) / min(headless) if min(headless) > 0 else float("nan")
    return out


def ensure_calibrated(log: Any) -> None:
    from trainpilot.predict import CostModel

    model = CostModel.open()
    if not model.is_calibrated:
        log("quick calibration (both modes' agents plan from it) ...")
        model.calibrate(quick=True)


def main(argv: list[str] | None = None) -> int:
    if "TRAINPILOT_HOME" not in os.environ:  # the parent makes a scratch home; its children inherit it
        os.environ["TRAINPILOT_HOME"] = tempfile.mkdtemp(prefix="tp-bench-")
        atexit.register(shutil.rmtree, os.environ["TRAINPILOT_HOME"], True)
    args = parse_args(argv)
    sys.path.insert(0, str(ROOT / "core"))
    sys.path.insert(0, str(ROOT))
    if args.child:
        return child(args)

    def log(text: str) -> None:
        print(text, file=sys.stderr, flush=True)

    from trainpilot.job.model_names import ZOO

    models = list(ZOO) if args.all else [args.model]
    threads = None if args.all else args.threads
    if threads is None:
        ensure_calibrated(log)
    rows = []
    for model in models:
        log(f"{model}: headless and app runs ...")
        rows.append((model, measure(args, model, threads, log)))
    fixed = f"cpu x{threads} in both" if threads else "each mode at its agent's plan"
    from trainpilot_tui.app.app import DEFAULT_REFRESH_HZ
    from trainpilot_tui.app.pace import BUSY_FACTOR

    refresh = f"{args.refresh_hz:g} Hz" if args.refresh_hz is not None else f"{DEFAULT_REFRESH_HZ:g} Hz ({DEFAULT_REFRESH_HZ / BUSY_FACTOR:g} Hz while the plan holds every core)"
    settle = "the app's default" if args.settle_s is None else f"{args.settle_s:g} s"
    print(f"TUI overhead: {args.samples} demo samples, {args.epochs} epochs (the first a warm-up; more where they train under {args.min_train_s:g} s headless), {fixed}, app at {args.size} sampling at {refresh}, settle {settle}; times: medians of each model's runs; app/headless: median of its paired ratios, {max(1, args.repeats)} pairs or more (up to {args.max_repeats}) while their 90 % interval holds {TARGET:.2f}")
    w = max([16] + [len(m[k]["plan"]) for _, m in rows for k in ("headless", "tui")])
    header = f"{'model':<12} {'epochs':>6} {'headless plan':<{w}} {'headless':>9}  {'app plan':<{w}} {'app':>9}  {'UI load':>8}  {'pairs':>5}  {'app/headless':>12}  {'90 % interval':>13}  {'noise':>6}"
    print(header)
    print("-" * len(header))
    for model, m in rows:
        h, t = m["headless"], m["tui"]
        ok = ("ok" if m["ratio"] <= TARGET else "over") + (" *" if m["undecided"] else "")
        print(f"{model:<12} {m['epochs']:>6} {h['plan']:<{w}} {h['train_s']:>8.2f}s  {t['plan']:<{w}} {t['train_s']:>8.2f}s  {t['ui_cores']:>6.2f} c  {len(m['pairs']):>5}  {m['ratio']:>12.3f}  {m['interval'][0]:>6.3f}-{m['interval'][1]:<6.3f}  x{m['noise']:>5.2f}  {ok}")
    if any(m["undecided"] for _, m in rows):
        print(f"* its 90 % interval still holds {TARGET:.2f} after {args.max_repeats} pairs: the machine's noise, not the app, decides its side")
    for model, m in rows:
        print(f"pairs {model}: " + " ".join(f"{r:.3f}" for r in m["pairs"]))
    worst = max(rows, key=lambda r: r[1]["ratio"])
    verdict = "met" if worst[1]["ratio"] <= TARGET else "NOT met"
    print(f"UI load = cores this process's own threads besides training used during the app's run (the agent counts it as load)")
    if max(1, args.repeats) > 1:
        print("90 % interval = where the median of the pairs' ratios lies, by bootstrap: how far another run of this table could land")
        print("noise = slowest / fastest of the same model's headless runs, interleaved with the app's: a ratio"
              " within that of 1.00 is the machine's noise as much as the app's cost")
    print(f"worst app/headless: {worst[1]['ratio']:.3f} ({worst[0]}); target <= {TARGET:.2f}: {verdict}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
