"""`trainpilot headless run` and `make-dataset`: the session, for scripts."""
from __future__ import annotations

import json
import signal
import sys
import threading
from pathlib import Path
from typing import Any, Optional

import typer

from .common import BACKEND_CHOICES, EXIT_OK, EXIT_SIGINT, EXIT_SIGTERM, fail, print_json, usage_error

from trainpilot.session import DEFAULT_EPOCHS  # light: the session module imports torch lazily
MODEL_HELP = (
    "Model: small_cnn, wide_cnn, large_dense, rnn, mlp, or path/to/file.py:ClassName (an nn.Module whose constructor takes no arguments"
    "). A model file is Python code and runs with your rights, like `python file.py`."
)
OBJECTIVE_HELP = (
    "What the agent minimises: time (seconds), energy (joules: measured by RAPL/NVML where the machine allows,"
    " else estimated and labelled est.) or edp (energy x delay)."
)
DATASET_HELP = (
    "Dataset: a directory with X_train.npy/y_train.npy (or X.npy/y.npy) or MNIST-style IDX files (.gz ok),"
    " a .npz with X/y, or a .csv whose last column is the label. Default: the bundled demo set."
)


def session_config(
    *, model: str, dataset: Optional[str], epochs: Optional[int], batch_size: int, lr: float, seed: int, backend: str, threads: Optional[int], resume: Optional[str] = None, layers: Optional[int] = None, freeze: Optional[int] = None,
    compile: bool = False, objective: str = "time",
) -> Any:
    from trainpilot.energy.objective import check_objective
    from trainpilot.session import SessionConfig

    try:
        check_objective(objective)
    except ValueError as exc:
        usage_error(str(exc))

    if backend not in BACKEND_CHOICES:
        usage_error(f"--backend must be one of {', '.join(BACKEND_CHOICES)}, got '{backend}'")
    if epochs is not None and epochs < 1:
        usage_error("--epochs must be at least 1")
    if epochs is None and not resume:
        epochs = DEFAULT_EPOCHS  # None only on --resume: train to the resumed run's own count
    if batch_size < 1:
        usage_error("--batch-size must be at least 1")
    if not lr > 0:
        usage_error("--lr must be positive")
    if freeze is not None and freeze < 1:
        usage_error("--freeze must be at least 1 (the number of leading layers Core ML runs frozen)")
    if threads is not None and threads < 1:
        usage_error("--threads must be at least 1")
    if compile and backend not in ("auto", "cpu"):
        usage_error(f"--compile is a CPU plan setting (torch.compile on the host); it does not go with --backend {backend}")
    model_config: Any = {"name": model, "layers": layers} if layers else model
    return SessionConfig(model=model_config, dataset=dataset, epochs=epochs, batch_size=batch_size, lr=lr, seed=seed, backend=backend, threads=threads, resume=resume, freeze=freeze, compile=compile, objective=objective)


class _SignalStop:
    """First Ctrl-C / SIGTERM: finish the step, checkpoint, exit 130/143. Second: exit at once."""

    def __init__(self, session: Any):
        self.session = session
        self.code: int | None = None
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> "_SignalStop":
        for signum in (signal.SIGINT, signal.SIGTERM):
            self._previous[signum] = signal.signal(signum, self._handle)
        return self

    def __exit__(self, *exc: Any) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)

    def _handle(self, signum: int, _frame: Any) -> None:
        code = EXIT_SIGINT if signum == signal.SIGINT else EXIT_SIGTERM
        if self.code is not None:
            raise SystemExit(code)
        self.code = code
        name = "SIGINT" if signum == signal.SIGINT else "SIGTERM"
        # Not from inside the handler: the session's queue lock may be held by the interrupted frame.
        threading.Thread(target=self.session.request_stop, args=(name,), daemon=True).start()


def run_command(
    model: str = typer.Option("small_cnn", "--model", "-m", help=MODEL_HELP),
    dataset: Optional[str] = typer.Option(None, "--dataset", "-d", help=DATASET_HELP),
    epochs: Optional[int] = typer.Option(None, "--epochs", "-e", help=f"Epochs to train (default {DEFAULT_EPOCHS}; with --resume, the resumed run's own count).", show_default=False),
    batch_size: int = typer.Option(64, "--batch-size", "-b", help="Mini-batch size."),
    lr: float = typer.Option(1e-3, "--lr", help="Adam learning rate."),
    seed: int = typer.Option(0, "--seed", help="Seed for weights, split and batch order (the CPU path is deterministic)."),
    backend: str = typer.Option("auto", "--backend", help="auto (the agent decides), cpu, ane, mps, cuda, or split (each batch shared by several workers at once: two 1-thread CPU workers, or an accelerator and the CPU). An unavailable backend falls back to the CPU with the reason."),
    threads: Optional[int] = typer.Option(None, "--threads", help="CPU threads (default: the agent decides from the observed load)."),
    compile: bool = typer.Option(False, "--compile", help="Train the model through torch.compile on the CPU (compiling takes seconds to minutes first; the agent offers it by itself only where `calibrate --compile` measured that it pays)."),
    layers: Optional[int] = typer.Option(None, "--layers", help="Learnable layers for a zoo model (default per model)."),
    objective: str = typer.Option("time", "--objective", help=OBJECTIVE_HELP),
    freeze: Optional[int] = typer.Option(None, "--freeze", help="ANE frozen-backbone mode: the first N learnable layers run forward in Core ML (macOS), the rest trains in PyTorch."),
    resume: Optional[str] = typer.Option(None, "--resume", help="Resume the run with this id (see `trainpilot headless history`) from its last checkpoint; `last`: the newest crashed or interrupted run."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object with the result on stdout at the end."),
    jsonl: bool = typer.Option(False, "--jsonl", help="Print every event as a JSON line on stdout as it happens."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress on stderr."),
    nproc: Optional[int] = typer.Option(None, "--nproc", help="Train as N ranks on this machine (torch.distributed, DDP; gloo on the CPU, nccl on GPUs), each rank pinned to its share of the cores, each batch split by measured rank speed. Across machines use torchrun (README, Scale-out)."),
    timeout: float = typer.Option(120.0, "--timeout", help="Distributed runs: seconds a rank waits for the others before the run fails with a checkpoint."),
    shares: str = typer.Option("measured", "--shares", help="Distributed runs: split each batch by measured rank speed (measured) or evenly (equal)."),
) -> None:
    """Observe, plan, train and report: the agent picks the fastest plan unless --backend says otherwise.

    Progress goes to stderr; with --json the result (schema in the README) goes to stdout.
    Exit codes: 0 success, 1 failure, 2 usage error, 130 interrupted (Ctrl-C), 143 terminated.
    """
    from trainpilot import events as ev
    from trainpilot.session import TrainingSession

    from .progress import StderrProgress

    config = session_config(model=model, dataset=dataset, epochs=epochs, batch_size=batch_size, lr=lr, seed=seed, backend=backend, threads=threads, resume=resume, layers=layers, freeze=freeze, compile=compile, objective=objective)
    from .distributed_run import dispatch_distributed

    dispatch_distributed(config, nproc=nproc, timeout=timeout, shares=shares, as_json=as_json, jsonl=jsonl, quiet=quiet, options=dict(model=model, dataset=dataset, epochs=epochs, batch_size=batch_size, lr=lr, seed=seed, backend=backend, threads=threads, layers=layers, resume=resume, objective=objective, jsonl=jsonl, quiet=quiet, timeout=timeout, shares=shares))
    session = TrainingSession(config)
    finished: ev.RunFinished | None = None
    with _SignalStop(session) as stop, StderrProgress(quiet=quiet) as progress:
        for event in session.events():
            progress.handle(event)
            if jsonl:
                sys.stdout.write(json.dumps(ev.event_to_dict(event), default=str) + "\n")
                sys.stdout.flush()
            if isinstance(event, ev.RunFinished):
                finished = event
    assert finished is not None
    if as_json:
        print_json(finished.result)
    if finished.status == "success":
        raise typer.Exit(EXIT_OK)
    if finished.status == "interrupted":
        if quiet:  # how to resume is the one thing a stopped run must always say
            typer.echo(f"interrupted: {finished.message}", err=True)
        raise typer.Exit(stop.code or EXIT_SIGINT)
    fail(finished.message)  # one line, even with --quiet: a failure is never silent


def make_dataset_command(
    directory: Path = typer.Argument(..., help="Directory to write X_train.npy and y_train.npy into (created if missing)."),
    samples: int = typer.Option(2400, "--samples", "-n", help="Number of samples."),
    seed: int = typer.Option(7, "--seed", help="Generator seed (the same seed writes the same files)."),
) -> None:
    """Write the bundled demo dataset (10 classes of 28x28 images) as .npy files, for the quickstart."""
    from trainpilot.data import write_demo_dataset

    if samples < 20:
        usage_error("--samples must be at least 20")
    try:
        out = write_demo_dataset(directory, samples, seed)
    except OSError as exc:
        fail(f"{directory}: cannot write ({exc.strerror or exc})")
    typer.echo(f"wrote {samples} samples to {out}/X_train.npy and y_train.npy", err=True)
