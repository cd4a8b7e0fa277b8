"""Real micro-benchmarks: small representative conv, dense and recurrent networks trained for a
few steps exactly the way `trainer.Trainer.train_step` trains (numpy batch -> tensor, Adam,
cross-entropy, accuracy), timed per step. Their profiles come from the same `profile_model` the
user's workload goes through, so the fit sees the features the prediction will see.

torch is imported inside the functions: this module is reachable from the CLI's --help path.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

    from trainpilot.predict.features import WorkFeatures


@dataclass(frozen=True)
class BenchSpec:
    """One micro-benchmark network. kind: conv | dense | recurrent | tiny."""

    kind: str
    input_shape: tuple[int, ...]
    width: int
    layers: int
    batch: int

    @property
    def name(self) -> str:
        shape = "x".join(map(str, self.input_shape))
        return f"{self.kind}-{shape}-w{self.width}-l{self.layers}-b{self.batch}"


# Chosen to span arithmetic intensity (FLOPs per byte), per-layer work, sequence length and batch
# for each kind, so the fit can tell fixed costs from FLOP costs from memory costs. None of them is
# one of the zoo's benchmark workloads.
FULL_SUITE: tuple[BenchSpec, ...] = (
    BenchSpec("tiny", (8,), 8, 1, 8),
    BenchSpec("tiny", (32,), 16, 3, 16),
    BenchSpec("dense", (64,), 64, 2, 16),
    BenchSpec("dense", (256,), 256, 2, 32),
    BenchSpec("dense", (600,), 160, 2, 32),
    BenchSpec("dense", (300,), 1024, 4, 32),
    BenchSpec("dense", (512,), 768, 3, 64),
    BenchSpec("dense", (1024,), 2048, 2, 128),
    BenchSpec("conv", (1, 24, 24), 8, 2, 32),
    BenchSpec("conv", (1, 20, 20), 24, 4, 32),
    BenchSpec("conv", (3, 32, 32), 12, 3, 64),
    BenchSpec("conv", (8, 12, 12), 64, 3, 64),
    BenchSpec("conv", (32, 8, 8), 128, 3, 32),
    BenchSpec("recurrent", (12, 16), 32, 1, 32),
    BenchSpec("recurrent", (32, 8), 48, 1, 16),
    BenchSpec("recurrent", (16, 24), 160, 1, 32),
    BenchSpec("recurrent", (24, 32), 96, 2, 64),
    BenchSpec("recurrent", (10, 64), 256, 1, 128),
)
# Quick mode (first sight of a machine): fewer points, still every kind at a low and a high
# arithmetic intensity, and more points than coefficients.
QUICK_SUITE: tuple[BenchSpec, ...] = tuple(FULL_SUITE[i] for i in (0, 3, 5, 7, 8, 9, 11, 12, 13, 15, 16))
# torch.compile (compile_cost.py): two networks of each compiled kind, at a small and a large step,
# so both the ratio and the fixed overhead of a compiled step can be told apart; one recurrent one.
COMPILE_SUITE: tuple[BenchSpec, ...] = tuple(FULL_SUITE[i] for i in (3, 7, 9, 11, 14))


def build_bench_model(spec: BenchSpec) -> torch.nn.Module:
    from torch import nn

    classes = 10
    if spec.kind in ("dense", "tiny"):
        mods: list[nn.Module] = []
        n_in = spec.input_shape[0]
        for _ in range(spec.layers - 1):
            mods += [nn.Linear(n_in, spec.width), nn.ReLU()]
            n_in = spec.width
        mods.append(nn.Linear(n_in, classes))
        return nn.Sequential(nn.Flatten(), *mods)
    if spec.kind == "conv":
        c_in, h, w = spec.input_shape
        mods = []
        for i in range(spec.layers - 1):
            mods += [nn.Conv2d(c_in, spec.width, 3, padding=1), nn.ReLU()]
            if i == 0 and h >= 16:  # pool large inputs once, as small CNNs do; keep small maps whole
                mods.append(nn.MaxPool2d(2))
                h, w = h // 2, w // 2
            c_in = spec.width
        mods += [nn.Flatten(), nn.Linear(c_in * h * w, classes)]
        return nn.Sequential(*mods)
    if spec.kind == "recurrent":

        class _Recurrent(nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.lstm = nn.LSTM(spec.input_shape[1], spec.width, num_layers=spec.layers, batch_first=True)
                self.head = nn.Linear(spec.width, classes)

            def forward(self, x: torch.Tensor) -> torch.Tensor:
                out, _ = self.lstm(x)
                return self.head(out[:, -1])

        return _Recurrent()
    raise ValueError(f"unknown micro-benchmark kind {spec.kind!r}")


def bench_features(spec: BenchSpec) -> WorkFeatures:
    """Profile the benchmark network with the product's own profiler, then read its features."""
    from trainpilot.job.workload import profile_model
    from trainpilot.predict.features import features_of

    model = build_bench_model(spec)
    profile = profile_model(model, spec.input_shape, 10, spec.batch * 4, name=spec.name, batch_size=spec.batch)
    extra = {"recurrent_layers": spec.layers} if spec.kind == "recurrent" else {}
    if extra:
        from dataclasses import replace

        profile = replace(profile, extra=extra)
    return features_of(profile)


class BenchTrainer:
    """A benchmark network and its optimizer, stepped exactly the way `Trainer.train_step` steps
    (numpy batch -> tensor, Adam, cross-entropy, accuracy count). `run` is what trains: the model
    itself, or a compiled wrapper around it (compile_cost.py)."""

    def __init__(
        self,
        spec: BenchSpec,
        device: str = "cpu",
        sync: Callable[[], None] | None = None,
        wrap: Callable[[torch.nn.Module], torch.nn.Module] | None = None,
        memory_format: str | None = None,
        precision: str | None = None,
    ):
        import numpy as np
        import torch

        from trainpilot.job.layout import model_to_layout

        torch.manual_seed(0)
        self.spec, self.dev = spec, torch.device(device)
        self.memory_format, self.precision = memory_format, precision  # the step settings (settings_calibration.py)
        self.model = model_to_layout(build_bench_model(spec).to(self.dev), memory_format)
        self.run = wrap(self.model) if wrap else self.model
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=1e-3)
        self.loss_fn = torch.nn.CrossEntropyLoss()
        self.rng = np.random.default_rng(0)
        self.pool = 4 * spec.batch
        self.X = self.rng.standard_normal((self.pool, *spec.input_shape), dtype=np.float32)
        self.y = self.rng.integers(0, 10, self.pool)
        self.sync = sync or (lambda: None)

    def step(self, batch: int | None = None) -> None:
        import numpy as np
        import torch

        from trainpilot.job.layout import batch_to_layout
        from trainpilot.job.precision import autocast

        idx = self.rng.permutation(self.pool)[: batch or self.spec.batch]
        x = batch_to_layout(
            torch.as_tensor(np.asarray(self.X[idx]), dtype=torch.float32).to(self.dev), self.memory_format
        )
        t = torch.as_tensor(self.y[idx]).to(self.dev)
        self.run.train()
        self.optimizer.zero_grad(set_to_none=True)
        with autocast(self.dev, self.precision):
            logits = self.run(x)
            loss = self.loss_fn(logits, t)
        loss.backward()
        self.optimizer.step()
        int((logits.argmax(dim=1) == t).sum())  # the trainer's accuracy count (and a device sync)
        float(loss.detach())

    def timed(self, steps: int = 1, batch: int | None = None) -> float:
        """Seconds per step over `steps` steps (device work included)."""
        start = time.perf_counter()
        for _ in range(steps):
            self.step(batch)
        self.sync()
        return (time.perf_counter() - start) / steps


def steady_step_s(bench: BenchTrainer, min_seconds: float) -> float:
    """Seconds per steady step: the mean of several blocks of steps without the slowest block, so
    one hiccup from another process does not move it, while the regular stalls of a contended
    core (which a real run pays too) still count. Stops at a hard wall-clock cap, so a machine
    busier than expected slows calibration down by a bounded amount instead of without end."""
    one = max(bench.timed(), 1e-5)
    cap = 4 * min_seconds
    if one > cap:  # a step longer than the whole budget: that step is the measurement
        return one
    per_block = max(1, int(min_seconds / 5 / one))
    blocks: list[float] = []
    spent = 0.0
    while len(blocks) < 2 or (spent < min_seconds and len(blocks) < 12) or (len(blocks) < 3 and spent < cap):
        blocks.append(bench.timed(per_block))
        spent += blocks[-1] * per_block
        if spent > cap:
            break
    return statistics.fmean(sorted(blocks)[:-1]) if len(blocks) > 2 else statistics.fmean(blocks)


def time_training_steps(
    spec: BenchSpec,
    threads: int | None,
    min_seconds: float,
    device: str = "cpu",
    sync: Callable[[], None] | None = None,
) -> tuple[float, float]:
    """Train the benchmark network; return (seconds per steady step, extra seconds of the first step).
    `threads` is set for the measurement and restored after."""
    import torch

    previous = torch.get_num_threads()
    if threads:
        torch.set_num_threads(threads)
    try:
        bench = BenchTrainer(spec, device, sync)
        first = bench.timed()
        steady = steady_step_s(bench, min_seconds)
        return steady, max(first - steady, 0.0)
    finally:
        torch.set_num_threads(previous)


def memory_bandwidth(threads: int | None, min_seconds: float = 0.1, megabytes: int = 64) -> float:
    """Sustained copy bandwidth in bytes/s (read + write), STREAM-copy style, with `threads`."""
    import torch

    previous = torch.get_num_threads()
    if threads:
        torch.set_num_threads(threads)
    try:
        n = megabytes * 1024 * 1024 // 4
        src = torch.ones(n)
        dst = torch.empty(n)
        dst.copy_(src)
        best = 0.0
        spent = 0.0
        reps = 0
        while reps < 3 or spent < min_seconds:
            start = time.perf_counter()
            dst.copy_(src)
            elapsed = time.perf_counter() - start
            spent += elapsed
            reps += 1
            best = max(best, 2 * 4 * n / elapsed)
        return best
    finally:
        torch.set_num_threads(previous)


def describe_spec(spec: BenchSpec) -> dict[str, Any]:
    return {
        "kind": spec.kind,
        "input_shape": list(spec.input_shape),
        "width": spec.width,
        "layers": spec.layers,
        "batch": spec.batch,
    }
