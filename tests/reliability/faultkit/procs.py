"""Run `trainpilot` (or `python -m train_orchestrated`) in a real subprocess and follow its events.

The run prints every event as a JSON line (--jsonl); a reader thread collects them so a test can
wait for "the first checkpoint" or "a step of epoch 2" and then send a signal at that moment.
"""
from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable

REPO = Path(__file__).resolve().parents[3]


def cli_command(args: list[str], module: str = "trainpilot_tui") -> list[str]:
    """`python -m trainpilot_tui ARGS` is the `trainpilot` console script; `train_orchestrated`
    is the seed's name for `trainpilot headless run`."""
    return [sys.executable, "-m", module, *args]


def child_env(home: Path, threads: int = 1) -> dict[str, str]:
    env = dict(os.environ)
    env["TRAINPILOT_HOME"] = str(home)
    env["OMP_NUM_THREADS"] = str(threads)  # the same thread count as the in-process reference
    env["PYTHONUNBUFFERED"] = "1"
    return env


class RunningCli:
    """A CLI run in a subprocess, its stdout JSON lines collected by a thread."""

    def __init__(self, args: list[str], home: Path, module: str = "trainpilot_tui", cwd: Path | None = None):
        self.proc = subprocess.Popen(
            cli_command(args, module), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env=child_env(home), cwd=cwd or REPO,
        )
        self.events: list[dict[str, Any]] = []
        self._queue: "queue.Queue[dict[str, Any] | None]" = queue.Queue()
        self.stderr = ""
        self._out = threading.Thread(target=self._read_stdout, daemon=True)
        self._err = threading.Thread(target=self._read_stderr, daemon=True)
        self._out.start()
        self._err.start()

    def _read_stdout(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            try:
                event = json.loads(line)
            except ValueError:
                continue
            self._queue.put(event)
        self._queue.put(None)

    def _read_stderr(self) -> None:
        assert self.proc.stderr is not None
        self.stderr = self.proc.stderr.read()

    def wait_for(self, predicate: Callable[[dict[str, Any]], bool], timeout: float = 60.0) -> dict[str, Any]:
        """The first event (from now on) that matches; fails if the run ends or time runs out first."""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"no matching event within {timeout}s; got {[e.get('kind') for e in self.events[-5:]]}")
            try:
                event = self._queue.get(timeout=left)
            except queue.Empty:
                continue
            if event is None:
                self._queue.put(None)
                raise AssertionError(f"the run ended first (rc={self.proc.wait()}); stderr: {self.stderr[-2000:]}")
            self.events.append(event)
            if predicate(event):
                return event

    def signal(self, signum: int) -> None:
        self.proc.send_signal(signum)

    def finish(self, timeout: float = 120.0) -> int:
        code = self.proc.wait(timeout=timeout)
        self._out.join(timeout=10)
        self._err.join(timeout=10)
        while True:
            try:
                event = self._queue.get_nowait()
            except queue.Empty:
                break
            if event is not None:
                self.events.append(event)
        return code


def run_cli(args: list[str], home: Path, timeout: float = 120.0, module: str = "trainpilot_tui") -> subprocess.CompletedProcess:
    return subprocess.run(cli_command(args, module), capture_output=True, text=True, env=child_env(home), cwd=REPO, timeout=timeout)


def is_step_of_epoch(epoch: int) -> Callable[[dict[str, Any]], bool]:
    return lambda e: e.get("kind") == "StepProgressed" and e.get("epoch") == epoch and e.get("step", 0) < e.get("steps_per_epoch", 0)
