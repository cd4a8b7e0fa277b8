"""How much does the terminal app slow training down? The same training job, once headless (the
session's events iterated, as `trainpilot headless run` does) and once under the Textual app with
live hardware sampling at 2 Hz and every panel drawing, compared on the training time the core
measures (sum of the epochs' actual seconds).

    python benchmarks/tui_overhead.py              # small_cnn, 9,600 demo samples, 3 epochs, all CPUs but one
    python benchmarks/tui_overhead.py --repeats 3  # interleaved pairs and their median (busy machines)

The app runs under Textual's headless driver (App.run_test): it lays out and renders every frame
to terminal output as it would on screen; only the final write to a terminal is skipped. Prints
one line per mode and the ratio (target: at most 1.05). One run of each, after a short warm-up
run that neither is charged for, so neither pays for first-call costs.
"""
from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from typing import Any


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    from trainpilot.hardware import usable_cpus

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="small_cnn")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--samples", type=int, default=9600, help="size of the demo set (4x the bundled 2,400: epochs of seconds, as real ones are, not of a second)")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--threads", type=int, default=max(1, usable_cpus() - 1), help="CPU threads for both runs (the same plan in both; default: all usable CPUs but one, the core a desktop leaves to its terminal)")
    parser.add_argument("--refresh-hz", type=float, default=2.0, help="hardware sampling rate of the app")
    parser.add_argument("--size", default="160x48", help="terminal size the app lays out for, WxH")
    parser.add_argument("--repeats", type=int, default=1, help="headless/app pairs, interleaved (on a busy machine the median of a few pairs is steadier)")
    return parser.parse_args(argv)


def config_for(args: argparse.Namespace, epochs: int) -> Any:
    from trainpilot.session import SessionConfig

    # a fixed plan, so both modes train exactly the same way; no history, so neither run changes the other's plan
    return SessionConfig(model=args.model, epochs=epochs, batch_size=args.batch_size, backend="cpu", threads=args.threads, record_history=False)


def headless_run(config: Any, dataset: Any) -> tuple[float, float]:
    """(training seconds the core measured, wall seconds) for the session iterated directly."""
    from trainpilot.session import TrainingSession

    session = TrainingSession(config, dataset=dataset)
    start = time.perf_counter()
    for _event in session.events():
        pass
    wall = time.perf_counter() - start
    assert session.finished is not None and session.finished.status == "success", session.finished
    return float(session.finished.result["actual_s"]), wall


def tui_run(config: Any, dataset: Any, refresh_hz: float, size: tuple[int, int]) -> tuple[float, float, int, float]:
    """(training seconds, wall seconds, frames drawn, CPU seconds of the app's own thread while
    training) for the same session under the app. The app thread's CPU time is what competes with training for the
    GIL, so it is the overhead's cause, measured without the noise of other processes."""
    from trainpilot.session import TrainingSession
    from trainpilot_tui.app import TrainPilotApp

    sessions: list[TrainingSession] = []

    def factory(cfg: Any) -> TrainingSession:
        sessions.append(TrainingSession(cfg, dataset=dataset))
        return sessions[-1]

    app = TrainPilotApp(config, session_factory=factory, refresh_hz=refresh_hz, discover_user_themes=False)
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
    session = sessions[-1]
    assert session.finished is not None and session.finished.status == "success", session.finished
    return float(session.finished.result["actual_s"]), wall, frames, app_cpu


def main(argv: list[str] | None = None) -> int:
    os.environ.setdefault("TRAINPILOT_HOME", tempfile.mkdtemp(prefix="tp-bench-"))
    args = parse_args(argv)
    width, height = (int(v) for v in args.size.lower().split("x"))
    from trainpilot.data import demo_dataset

    dataset = demo_dataset(args.samples)
    headless_run(config_for(args, 1), dataset)  # warm-up: torch's first calls, page cache, allocator

    ratios = []
    for _ in range(max(1, args.repeats)):
        train_h, wall_h = headless_run(config_for(args, args.epochs), dataset)
        print(f"headless: training {train_h:.2f} s (wall {wall_h:.2f} s)  {args.model}, {args.samples} samples, {args.epochs} epochs, cpu x{args.threads}")
        train_t, wall_t, frames, app_cpu = tui_run(config_for(args, args.epochs), dataset, args.refresh_hz, (width, height))
        print(f"tui:      training {train_t:.2f} s (wall {wall_t:.2f} s from the first step)  {frames} frames drawn at {width}x{height}, sampling at {args.refresh_hz:g} Hz; app thread busy {app_cpu:.2f} s ({app_cpu / wall_t:.1%} of the training wall time)")
        ratios.append(train_t / train_h)
        print(f"ratio tui/headless: {ratios[-1]:.3f}  ({(ratios[-1] - 1) * 100:+.1f} % training time; target <= +5 %)")
    if len(ratios) > 1:
        median = statistics.median(ratios)
        print(f"median of {len(ratios)} pairs: {median:.3f}  ({(median - 1) * 100:+.1f} %)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
