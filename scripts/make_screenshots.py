"""Make the README's screenshots: the real app on a real, short training run.

    python scripts/make_screenshots.py            # writes screenshots/*.svg

It trains small_cnn on the bundled demo set for 20 epochs (under a minute on a laptop CPU, the
agent's first-sight calibration included), with live hardware sampling, in a fresh TRAINPILOT_HOME
so your own history is neither read nor changed. In epoch 2 it does what a user would: pause (p),
open the override dialog (o), pick another plan, resume (p); so the trace shows the user override
and the predicted-vs-actual view shows the split epoch. It saves:

    screenshots/tui-decision-80x24.svg    paused in epoch 2 in a plain 80x24 terminal: the agent's
                                          plan and confidence pinned in the Run panel
    screenshots/tui-override-chooser.svg  the override dialog: each plan's prediction, n/a reasons
    screenshots/tui-training-160x48.svg   mid-run from epoch 3, wide terminal, dark theme
    screenshots/tui-training-80x24.svg    the same moment in a plain 80x24 terminal
    screenshots/tui-finished-light.svg    the finished run, light theme

Figures differ from run to run and machine to machine: they are real measurements.
"""
from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parents[1]


async def wait_for(pilot: Any, condition: Callable[[], object], what: str, timeout: float = 300.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            run = pilot.app.main.run_panel
            raise SystemExit(f"error: timed out waiting for {what} (run {run.state}, at {run.progress})")
        await pilot.pause(0.1)


def other_plan(app: Any) -> tuple[str, int | None]:
    """A plan to move to that is not the current one: another CPU thread count, or another backend
    that can run here."""
    book = app.main.book
    current = book.current
    for option in book.plan_options():
        if option.available and option.plan != current and option.plan.backend == "cpu":
            return option.plan.backend, option.plan.threads
    for option in book.plan_options():
        if option.available and option.plan != current:
            return option.plan.backend, option.plan.threads
    return "cpu", 1 if current is None or current.threads != 1 else 2


async def shoot(out: Path, epochs: int) -> list[Path]:
    from trainpilot.run.session import SessionConfig
    from trainpilot_tui.app import TrainPilotApp
    from trainpilot_tui.app.screens import BackendChooser

    app = TrainPilotApp(SessionConfig(model="small_cnn", epochs=epochs), discover_user_themes=False)
    written: list[Path] = []

    def save(name: str) -> None:
        written.append(Path(app.save_screenshot(filename=name, path=str(out))))

    async with app.run_test(size=(160, 48)) as pilot:
        run = app.main.run_panel
        await wait_for(pilot, lambda: run.progress is not None and (run.progress.epoch, run.progress.step / run.progress.steps_per_epoch) >= (2, 0.3), "epoch 2")
        # A user's override: pause, open the chooser, pick another plan, resume.
        await pilot.press("p")
        await wait_for(pilot, lambda: app.paused, "the pause")
        # Before it, the agent's decision in a plain terminal: pinned in the Run panel, the trace
        # scrolled on past it
        await pilot.resize_terminal(80, 24)
        await wait_for(pilot, lambda: len(run.epochs) >= 1, "epoch 1's figures (painted at most every 2 s)")
        await pilot.pause(0.6)
        save("tui-decision-80x24.svg")
        await pilot.resize_terminal(110, 32)
        await pilot.press("o")
        await wait_for(pilot, lambda: isinstance(app.screen, BackendChooser), "the override dialog")
        await pilot.pause(0.3)
        save("tui-override-chooser.svg")
        chooser = app.screen
        backend, threads = other_plan(app)
        chooser.query_one("OptionList").highlighted = next(i for i, o in enumerate(chooser.options) if (o.plan.backend, o.plan.threads) == (backend, threads))
        await pilot.press("enter")
        await wait_for(pilot, lambda: "user override" in app.main.agent_panel.text, "the override to take effect")
        await wait_for(pilot, lambda: app.screen is app.main, "the dialog to close")
        await pilot.press("p")
        await wait_for(pilot, lambda: not app.paused, "the run to resume")
        await pilot.resize_terminal(160, 48)
        await wait_for(pilot, lambda: run.progress is not None and (run.progress.epoch, run.progress.step / run.progress.steps_per_epoch) >= (3, 0.3), "epoch 3")
        await wait_for(pilot, lambda: len(run.epochs) >= 2, "epoch 2's figures (painted at most every 2 s)")
        await pilot.pause(0.6)  # one more hardware sample
        save("tui-training-160x48.svg")
        await pilot.resize_terminal(80, 24)
        await pilot.pause(0.6)
        save("tui-training-80x24.svg")
        await wait_for(pilot, lambda: not app.running, "the run to finish")
        await pilot.resize_terminal(140, 40)
        app.theme = "trainpilot-light"
        await pilot.pause(0.6)
        save("tui-finished-light.svg")
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "screenshots")
    parser.add_argument("--epochs", type=int, default=20)  # epochs of ~0.3 s: mid-run must last past the 2-s figures interval
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    os.environ["TRAINPILOT_HOME"] = tempfile.mkdtemp(prefix="tp-screenshots-")
    for path in asyncio.run(shoot(args.out, max(4, args.epochs))):
        print(f"wrote {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
