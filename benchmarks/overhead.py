"""What does TrainPilot cost on the CPU? Its epoch time next to a bare, hand-written PyTorch loop
on the same model, the same data and the same thread count, measured in one run.

    python benchmarks/overhead.py                       # small_cnn, the bundled 2,400-sample demo set, all usable CPUs
    python benchmarks/overhead.py --model mlp --threads 1 --repeats 4
    python benchmarks/overhead.py --adapt off           # the session without its closed loop's watch

TrainPilot's epoch is the wall time from one `EpochTimed` event of a real `TrainingSession` to the
next, as `trainpilot headless run` iterates them: the training steps with everything the session
does around them (step events, override and pause polling, the epoch's checkpoint with its fsync,
the history row's update, the energy meter's marks), plus validation. The bare loop is what a user
would write by hand: tensors indexed by a `torch.randperm`, Adam, cross-entropy, `loss.item()` per
step, and the same validation pass at each epoch end. Both build the model with the same seed on
the same split.

The two run side by side in this process, one epoch each in turn (the session's event stream is
paused between its epochs while the bare loop runs one): each TrainPilot epoch is paired with the
bare epoch next to it, seconds apart, and the order within a pair alternates. This machine's speed
drifts by several per cent from one minute to the next (a bare loop against itself, whole runs
interleaved, read 1.05); a pair shares its minute, so the drift cancels out of its ratio. The first
epoch of every run is a warm-up neither is charged for. Printed: the median epoch of each, and the
median of the pairs' ratios with a bootstrap 90 % interval; the last line is that ratio (target at
most 1.05, goal 1.02). While the bare loop runs, the paused session's energy meter still reads the
CPU time once a second (about 0.5 ms): charged to the bare loop, under 0.1 %.
Run it alone on the machine (`flock -x /tmp/tp-cpu.lock ...` here).
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

from paired import bootstrap_median


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    from trainpilot.machine.probe import usable_cpus

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="small_cnn", help="a zoo model (small_cnn, mlp, large_dense, rnn)")
    parser.add_argument("--samples", type=int, default=2400, help="size of the demo set (the bundled one: 2,400)")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--threads", type=int, default=usable_cpus(), help="CPU threads for both (default: all usable CPUs, the agent's idle choice here)")
    parser.add_argument("--epochs", type=int, default=12, help="epochs per run of each; the first is a warm-up")
    parser.add_argument("--repeats", type=int, default=3, help="runs (a fresh session and a fresh bare loop each)")
    parser.add_argument("--adapt", choices=("on", "verify", "off"), default="on",
                        help="the session's closed loop: its plan is pinned, so on it only watches (what differs is the watch)")
    args = parser.parse_args(argv)
    if args.epochs < 2 or args.repeats < 1 or args.threads < 1:
        parser.error("--epochs must be at least 2, --repeats and --threads at least 1")
    return args


class BareLoop:
    """A hand-written training loop, one epoch per call."""

    def __init__(self, model: Any, train: Any, val: Any, *, batch_size: int, lr: float, threads: int, seed: int):
        import torch

        self.torch, self.model, self.threads, self.batch_size = torch, model, threads, batch_size
        self.X, self.y = torch.as_tensor(train.X, dtype=torch.float32), torch.as_tensor(train.y)
        self.Xv, self.yv = torch.as_tensor(val.X, dtype=torch.float32), torch.as_tensor(val.y)
        self.optimizer = torch.optim.Adam(model.parameters(), lr=lr)
        self.loss_fn = torch.nn.CrossEntropyLoss()
        self.generator = torch.Generator().manual_seed(seed)

    def epoch(self) -> float:
        """One epoch and its validation; returns the wall seconds."""
        torch, model = self.torch, self.model
        torch.set_num_threads(self.threads)  # as the session's plan does before its steps
        start = time.perf_counter()
        model.train()
        total = correct = 0.0
        for idx in torch.randperm(len(self.X), generator=self.generator).split(self.batch_size):
            xb, yb = self.X[idx], self.y[idx]
            self.optimizer.zero_grad(set_to_none=True)
            logits = model(xb)
            loss = self.loss_fn(logits, yb)
            loss.backward()
            self.optimizer.step()
            total += loss.item() * len(idx)
            correct += (logits.argmax(dim=1) == yb).sum().item()
        model.eval()
        with torch.no_grad():
            val_correct = sum((model(xb).argmax(dim=1) == yb).sum().item() for xb, yb in zip(self.Xv.split(512), self.yv.split(512)))
        seconds = time.perf_counter() - start
        _ = (total / len(self.X), correct / len(self.X), val_correct / max(len(self.Xv), 1))  # what the loop reports
        return seconds


class PilotRun:
    """A real session on a fixed CPU plan, one epoch (EpochTimed to EpochTimed) per call."""

    def __init__(self, dataset: Any, *, model: str, epochs: int, batch_size: int, lr: float, threads: int, seed: int,
                 adapt: str = "on"):
        from trainpilot import events as ev
        from trainpilot.run.session import SessionConfig, TrainingSession

        self.ev = ev
        config = SessionConfig(model=model, epochs=epochs, batch_size=batch_size, lr=lr, seed=seed, backend="cpu", threads=threads,
                               adapt=adapt)
        self.session = TrainingSession(config, dataset=dataset)
        self._events = self.session.events()
        for event in self._events:  # observing and planning are not an epoch's cost
            if isinstance(event, ev.BackendChosen):
                break

    def epoch(self) -> float:
        start = time.perf_counter()
        for event in self._events:
            if isinstance(event, self.ev.EpochTimed):
                return time.perf_counter() - start
        raise RuntimeError(f"the session ended before its epoch: {self.session.finished}")

    def finish(self) -> None:
        for _event in self._events:
            pass
        finished = self.session.finished
        assert finished is not None and finished.status == "success", finished


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    os.environ["TRAINPILOT_HOME"] = tempfile.mkdtemp(prefix="tp-overhead-")  # never the user's history
    atexit.register(shutil.rmtree, os.environ["TRAINPILOT_HOME"], True)
    os.environ["TRAINPILOT_AUTO_CALIBRATE"] = "0"  # calibrating is a one-off, not an epoch's cost
    import torch

    from trainpilot.job.data import demo_dataset
    from trainpilot.job.prepare import seed_everything
    from trainpilot.job.models import build_model

    seed, lr = 0, 1e-3
    dataset = demo_dataset(args.samples)
    train, val = dataset.split(0.1, seed)  # the split the session makes
    params = sum(p.numel() for p in build_model(args.model, dataset.sample_shape, dataset.num_classes).parameters())
    steps = -(-len(train) // args.batch_size)
    print(f"model {args.model} ({params:,} params), {len(train)} training / {len(val)} validation samples, batch {args.batch_size},"
          f" {steps} steps per epoch, {args.threads} thread(s), adapt {args.adapt}, torch {torch.__version__}; {args.repeats} run(s) of"
          f" {args.epochs} epochs each, TrainPilot's and the bare loop's epochs in turn, the first of each run not counted", flush=True)
    bare: list[float] = []
    pilot: list[float] = []
    for rep in range(args.repeats):
        session = PilotRun(dataset, model=args.model, epochs=args.epochs, batch_size=args.batch_size, lr=lr, threads=args.threads, seed=seed,
                           adapt=args.adapt)
        seed_everything(seed)
        loop = BareLoop(build_model(args.model, dataset.sample_shape, dataset.num_classes), train, val,
                        batch_size=args.batch_size, lr=lr, threads=args.threads, seed=seed)
        pairs = []
        for epoch in range(args.epochs):
            if (rep + epoch) % 2 == 0:
                b = loop.epoch()
                p = session.epoch()
            else:
                p = session.epoch()
                b = loop.epoch()
            pairs.append((b, p))
        session.finish()
        bare.extend(b for b, _ in pairs[1:])
        pilot.extend(p for _, p in pairs[1:])
        print(f"  run {rep + 1}, bare / TrainPilot ms per epoch: " + ", ".join(f"{b * 1000:.0f}/{p * 1000:.0f}" for b, p in pairs), flush=True)
    ratios = [p / b for b, p in zip(bare, pilot)]
    ratio = statistics.median(ratios)
    low, high = bootstrap_median(ratios)
    b, p = statistics.median(bare), statistics.median(pilot)
    print(f"pairs: {len(ratios)}; their ratios TrainPilot / bare range {min(ratios):.3f} to {max(ratios):.3f}, median {ratio:.3f} (90 % interval {low:.3f} to {high:.3f})")
    print(f"bare PyTorch loop: {b * 1000:.1f} ms per epoch (median of {len(bare)} epochs; {b / steps * 1e3:.2f} ms per step)")
    print(f"TrainPilot:        {p * 1000:.1f} ms per epoch (median of {len(pilot)} epochs; {p / steps * 1e3:.2f} ms per step)")
    print(f"ratio TrainPilot / bare: {ratio:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
