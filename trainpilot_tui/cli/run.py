"""`trainpilot headless run` and `make-dataset`: the session, for scripts."""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Optional

import typer

from trainpilot.run.config import DEFAULT_EPOCHS

from .common import EXIT_OK, EXIT_SIGINT, fail, print_json, usage_error
from .options import (
    ADAPT_HELP,
    DATASET_HELP,
    JOB_HELP,
    MEMORY_FORMAT_HELP,
    MODEL_HELP,
    OBJECTIVE_HELP,
    PRECISION_HELP,
    WORKERS_HELP,
    session_config,
)
from .signals import SignalStop
def run_command(
    model: Optional[str] = typer.Option(None, "--model", "-m", help=MODEL_HELP, show_default=False),
    dataset: Optional[str] = typer.Option(None, "--dataset", "-d", help=DATASET_HELP),
    job: Optional[str] = typer.Option(None, "--job", help=JOB_HELP),
    workers: Optional[int] = typer.Option(None, "--workers", help=WORKERS_HELP, show_default=False),
    epochs: Optional[int] = typer.Option(None, "--epochs", "-e", help=f"Epochs to train (default {DEFAULT_EPOCHS}; with --resume, the resumed run's own count).", show_default=False),
    batch_size: Optional[int] = typer.Option(None, "--batch-size", "-b", show_default=False,
                                             help="Mini-batch size (default 64; a --job sets its own)."),
    lr: float = typer.Option(1e-3, "--lr", help="Adam learning rate."),
    seed: int = typer.Option(0, "--seed", help="Seed for weights, split and batch order (the CPU path is deterministic)."),
    backend: str = typer.Option("auto", "--backend", help="auto (the agent decides), cpu, ane, mps, cuda, or split (each batch shared by several workers at once: two 1-thread CPU workers, or an accelerator and the CPU). An unavailable backend falls back to the CPU with the reason."),
    threads: Optional[int] = typer.Option(None, "--threads", help="CPU threads (default: the agent decides from the observed load)."),
    compile: bool = typer.Option(False, "--compile", help="Train the model through torch.compile on the CPU (compiling takes seconds to minutes first; the agent offers it by itself only where `calibrate --compile` measured that it pays)."),
    layers: Optional[int] = typer.Option(None, "--layers", help="Learnable layers for a zoo model (default per model)."),
    objective: str = typer.Option("time", "--objective", help=OBJECTIVE_HELP),
    memory_format: str = typer.Option("auto", "--memory-format", help=MEMORY_FORMAT_HELP),
    precision: str = typer.Option("fp32", "--precision", help=PRECISION_HELP),
    adapt: str = typer.Option("on", "--adapt", help=ADAPT_HELP),
    freeze: Optional[int] = typer.Option(None, "--freeze", help="ANE frozen-backbone mode: the first N learnable layers run forward in Core ML (macOS), the rest trains in PyTorch."),
    resume: Optional[str] = typer.Option(None, "--resume", help="Resume the run with this id (see `trainpilot headless history`) from its last checkpoint; `last`: the newest crashed or interrupted run."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object with the result on stdout at the end."),
    jsonl: bool = typer.Option(False, "--jsonl", help="Print every event as a JSON line on stdout as it happens."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress on stderr."),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="The agent's every line on stderr: each plan's prediction and every reason, plans by their long labels (by default the decision is one table and no line passes 160 characters)."),
    nproc: Optional[int] = typer.Option(None, "--nproc", help="Train as N ranks on this machine (torch.distributed, DDP; gloo on the CPU, nccl on GPUs), each rank pinned to its share of the cores, each batch split by measured rank speed. Across machines use torchrun (docs/parallel.md)."),
    timeout: float = typer.Option(120.0, "--timeout", help="Distributed runs: seconds a rank waits for the others before the run fails with a checkpoint."),
    shares: str = typer.Option("measured", "--shares", help="Distributed runs: split each batch by measured rank speed (measured) or evenly (equal)."),
) -> None:
    """Observe, plan, train and report: the agent picks the fastest plan unless --backend says otherwise.

    Progress goes to stderr; with --json the result (schema: docs/json.md) goes to stdout.
    A --job that cannot train (its make_job raises, a loss that is not a scalar, a batch the model
    cannot take, ...) is a failure: one `error:` line, and with --json the failed result.
    Exit codes: 0 success, 1 failure, 2 usage error, 130 interrupted (Ctrl-C), 143 terminated.
    """
    from trainpilot import events as ev
    from trainpilot.run.session import TrainingSession

    from .progress import StderrProgress

    config = session_config(model=model, dataset=dataset, epochs=epochs, batch_size=batch_size, lr=lr, seed=seed, backend=backend, threads=threads, resume=resume, layers=layers, freeze=freeze, compile=compile, objective=objective,
                            job=job, workers=workers, memory_format=memory_format, precision=precision, adapt=adapt)
    from .distributed_run import dispatch_distributed

    dispatch_distributed(config, nproc=nproc, timeout=timeout, shares=shares, as_json=as_json, jsonl=jsonl, quiet=quiet, options=dict(model=model, dataset=dataset, job=_for_ranks(job), workers=workers, epochs=epochs, batch_size=batch_size, lr=lr, seed=seed, backend=backend, threads=threads, layers=layers, resume=resume, objective=objective, memory_format=memory_format, precision=precision, jsonl=jsonl, quiet=quiet, verbose=verbose, timeout=timeout, shares=shares))
    session = TrainingSession(config)
    finished: ev.RunFinished | None = None
    with SignalStop(session) as stop, StderrProgress(quiet=quiet, verbose=verbose) as progress:
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


def _for_ranks(job: Optional[str]) -> Optional[str]:
    """The job reference each rank loads itself: the file's absolute path, as a rank may start elsewhere."""
    if job is None:
        return None
    from trainpilot.job.job_file import absolute_reference

    return absolute_reference(job)


def make_dataset_command(
    directory: Path = typer.Argument(..., help="Directory to write X_train.npy and y_train.npy into (created if missing)."),
    samples: int = typer.Option(2400, "--samples", "-n", help="Number of samples."),
    seed: int = typer.Option(7, "--seed", help="Generator seed (the same seed writes the same files)."),
) -> None:
    """Write the bundled demo dataset (10 classes of 28x28 images) as .npy files, for the quickstart."""
    from trainpilot.job.data import write_demo_dataset

    if samples < 20:
        usage_error("--samples must be at least 20")
    try:
        out = write_demo_dataset(directory, samples, seed)
    except OSError as exc:
        fail(f"{directory}: cannot write ({exc.strerror or exc})")
    typer.echo(f"wrote {samples} samples to {out}/X_train.npy and y_train.npy", err=True)
