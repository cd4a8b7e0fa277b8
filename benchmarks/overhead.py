"""What does TrainPilot cost on the CPU? Its epoch time next to a bare, hand-written PyTorch loop
on the same model, the same data and the same thread count, measured in one run.

    python benchmarks/overhead.py                       # small_cnn, the bundled 2,400-sample demo set, all usable CPUs
    python benchmarks/overhead.py --model mlp --threads 1 --repeats 9

TrainPilot's epoch is the wall time from one `EpochTimed` event of a real `TrainingSession` to the
next, as `trainpilot headless run` iterates them: the training steps with everything the session
does around them (step events, override and pause polling, the epoch's checkpoint with its fsync,
the history row's update), plus validation. The bare loop is what a user would write by hand:
tensors indexed by a `torch.randperm`, Adam, cross-entropy, `loss.item()` per step, and the same
validation pass at each epoch end. Both build the model with the same seed on the same split.

Repetitions are interleaved (bare, TrainPilot, TrainPilot, bare, ...), so a machine that drifts
slows both alike; the first epoch of every run is a warm-up neither is charged for; the figures
are the medians of the remaining epochs. The last line is the ratio TrainPilot / bare (target at
most 1.05, goal 1.02). Run it alone on the machine (`flock -x /tmp/tp-cpu.lock ...` here).
"""
from __future__ import annotations

import argparse
import atexit
import os
import shutil
import statistics
import sys
import tempfile
import time
from typing import Any


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    from trainpilot.hardware import usable_cpus

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="small_cnn", help="a zoo model (small_cnn, mlp, large_dense, rnn)")
    parser.add_argument("--samples", type=int, default=2400, help="size of the demo set (the bundled one: 2,400)")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--threads", type=int, default=usable_cpus(), help="CPU threads for both (default: all usable CPUs, the agent's idle choice here)")
    parser.add_argument("--epochs", type=int, default=4, help="epochs per run; the first is a warm-up")
    parser.add_argument("--repeats", type=int, default=6, help="runs of each, interleaved")
    args = parser.parse_args(argv)
    if args.epochs < 2 or args.repeats < 1 or args.threads < 1:
        parser.error("--epochs must be at least 2, --repeats and --threads at least 1")
    return args


def bare_loop(model: Any, train: Any, val: Any, *, epochs: int, batch_size: int, lr: float, threads: int, seed: int) -> list[float]:
    """A hand-written training loop; returns each epoch's wall seconds."""
    import torch

    torch.set_num_threads(threads)
    X, y = torch.as_tensor(train.X, dtype=torch.float32), torch.as_tensor(train.y)
    Xv, yv = torch.as_tensor(val.X, dtype=torch.float32), torch.as_tensor(val.y)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    loss_fn = torch.nn.CrossEntropyLoss()
    generator = torch.Generator().manual_seed(seed)
    times = []
    for _epoch in range(epochs):
        start = time.perf_counter()
        model.train()
        total = correct = 0.0
        for idx in torch.randperm(len(X), generator=generator).split(batch_size):
            xb, yb = X[idx], y[idx]
            optimizer.zero_grad(set_to_none=True)
            logits = model(xb)
            loss = loss_fn(logits, yb)
            loss.backward()
            optimizer.step()
            total += loss.item() * len(idx)
            correct += (logits.argmax(dim=1) == yb).sum().item()
        model.eval()
        with torch.no_grad():
            val_correct = sum((model(xb).argmax(dim=1) == yb).sum().item() for xb, yb in zip(Xv.split(512), yv.split(512)))
        times.append(time.perf_counter() - start)
        _ = (total / len(X), correct / len(X), val_correct / max(len(Xv), 1))  # what the loop reports
    return times


def trainpilot_run(dataset: Any, *, model: str, epochs: int, batch_size: int, lr: float, threads: int, seed: int) -> list[float]:
    """A real session on a fixed CPU plan; returns each epoch's wall seconds (EpochTimed to EpochTimed)."""
    from trainpilot import events as ev
    from trainpilot.session import SessionConfig, TrainingSession

    config = SessionConfig(model=model, epochs=epochs, batch_size=batch_size, lr=lr, seed=seed, backend="cpu", threads=threads)
    session = TrainingSession(config, dataset=dataset)
    marks: list[float] = []
    for event in session.events():
        if isinstance(event, ev.BackendChosen) and not marks:
            marks.append(time.perf_counter())  # training starts: observing and planning are done
        elif isinstance(event, ev.EpochTimed):
            marks.append(time.perf_counter())
    assert session.finished is not None and session.finished.status == "success", session.finished
    return [b - a for a, b in zip(marks, marks[1:])]


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    os.environ["TRAINPILOT_HOME"] = tempfile.mkdtemp(prefix="tp-overhead-")  # never the user's history
    atexit.register(shutil.rmtree, os.environ["TRAINPILOT_HOME"], True)
    os.environ["TRAINPILOT_AUTO_CALIBRATE"] = "0"  # calibrating is a one-off, not an epoch's cost
    import torch

    from trainpilot.data import demo_dataset
    from trainpilot.trainer import seed_everything
    from trainpilot.workload import build_model

    seed, lr = 0, 1e-3
    dataset = demo_dataset(args.samples)
    train, val = dataset.split(0.1, seed)  # the split the session makes
    params = sum(p.numel() for p in build_model(args.model, dataset.sample_shape, dataset.num_classes).parameters())
    steps = -(-len(train) // args.batch_size)
    print(f"model {args.model} ({params:,} params), {len(train)} training / {len(val)} validation samples, batch {args.batch_size},"
          f" {steps} steps per epoch, {args.threads} thread(s), torch {torch.__version__}; {args.repeats} interleaved runs of"
          f" {args.epochs} epochs each, first epoch of each run not counted", flush=True)
    bare: list[float] = []
    pilot: list[float] = []
    for rep in range(args.repeats):
        for which in (("bare", "trainpilot") if rep % 2 == 0 else ("trainpilot", "bare")):
            if which == "bare":
                seed_everything(seed)
                model = build_model(args.model, dataset.sample_shape, dataset.num_classes)
                epochs = bare_loop(model, train, val, epochs=args.epochs, batch_size=args.batch_size, lr=lr, threads=args.threads, seed=seed)
                bare.extend(epochs[1:])
            else:
                epochs = trainpilot_run(dataset, model=args.model, epochs=args.epochs, batch_size=args.batch_size, lr=lr, threads=args.threads, seed=seed)
                pilot.extend(epochs[1:])
            print(f"  run {rep + 1} {which:>10}: epochs " + ", ".join(f"{t * 1000:.0f}" for t in epochs) + " ms", flush=True)
    b, p = statistics.median(bare), statistics.median(pilot)
    print(f"bare PyTorch loop: {b * 1000:.1f} ms per epoch (median of {len(bare)} epochs; {b / steps * 1e3:.2f} ms per step)")
    print(f"TrainPilot:        {p * 1000:.1f} ms per epoch (median of {len(pilot)} epochs; {p / steps * 1e3:.2f} ms per step)")
    print(f"ratio TrainPilot / bare: {p / b:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
