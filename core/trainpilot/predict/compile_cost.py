"""What torch.compile costs and gives on this machine, measured by `trainpilot headless calibrate
--compile`, and how a compiled plan's time follows from the eager one:

    compile_s     = once_s + graphs x per_layer_s[k] x learnable layers
    compiled step = step_ratio[k] x eager step + step_overhead_s[k]     k = the dominant layer kind
    run_s         = epochs x steps x compiled step + compile_s

Both are keyed by the network's dominant kind because that is what decides how much inductor
compiles at all: a conv net's backward is the expensive graph, while a network around an nn.LSTM is
hardly compiled (dynamo leaves the fused LSTM to eager PyTorch: its "compile" is near instant,
and the step gets only the wrapper's overhead). `graphs` is 1, or 2 when the epoch ends on a
smaller batch (backends/compiled.py compiles each batch shape statically). `once_s` is inductor's own start-up,
paid by the first compile in a process. The speed side is measured at one thread count (all
threads) and applied to every compiled plan: a compiled step's advantage is in fused element-wise
code and fewer dispatches, which threads scale alike. Compiling is measured with inductor's caches
off, so the prediction is that of a model compiled for the first time; a repeated run that hits the
cache is faster, and the history learns that for its workload like any other miss.

On the 2-core machine this was built on (torch 2.13) compiling cost seconds per graph and of
start-up, and compiled steps were not reliably faster than eager ones (`trainpilot headless
calibrate --compile` prints the table; measured: docs/measurements.md#cited-in-the-code-prediction,
docs/measurements.md#torchcompile).
So there a compiled plan is predicted, shown and never chosen; on a machine where inductor's code
wins, a long enough run makes it the fastest plan.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from trainpilot.predict.features import KINDS, WorkFeatures

if TYPE_CHECKING:
    from trainpilot.predict.microbench import BenchSpec

Progress = Callable[[float, str], None]


@dataclass(frozen=True)
class CompileSample:
    """One measured network: what it holds, and what compiling it cost and gave."""

    name: str
    kind: str
    layers: dict[str, int]  # learnable layers by kind
    eager_step_s: float
    compiled_step_s: float
    first_compile_s: float  # the first compiled step minus a steady one (includes start-up for the first network)
    recompile_s: float  # the step with a new batch shape minus a steady one: one more graph

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CompileSample:
        return cls(
            str(data["name"]),
            str(data["kind"]),
            {str(k): int(v) for k, v in data["layers"].items()},
            float(data["eager_step_s"]),
            float(data["compiled_step_s"]),
            float(data["first_compile_s"]),
            float(data["recompile_s"]),
        )


@dataclass(frozen=True)
class CompileCalibration:
    threads: int
    once_s: float
    per_layer_s: dict[str, float]  # seconds per learnable layer of one graph, by dominant kind
    step_ratio: dict[str, float]
    step_overhead_s: dict[str, float]
    torch_version: str
    samples: tuple[CompileSample, ...] = ()
    duration_s: float = 0.0
    created_at: float = field(default_factory=time.time)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CompileCalibration:
        floats = lambda key: {str(k): float(v) for k, v in data[key].items()}  # noqa: E731
        return cls(
            threads=int(data["threads"]),
            once_s=float(data["once_s"]),
            per_layer_s=floats("per_layer_s"),
            step_ratio=floats("step_ratio"),
            step_overhead_s=floats("step_overhead_s"),
            torch_version=str(data["torch_version"]),
            samples=tuple(CompileSample.from_dict(s) for s in data.get("samples", ())),
            duration_s=float(data.get("duration_s", 0.0)),
            created_at=float(data.get("created_at", 0.0)),
        )

    def graphs(self, features: WorkFeatures) -> int:
        return 1 if features.samples % features.batch_size == 0 else 2

    def compile_s(self, features: WorkFeatures) -> float:
        kind = features.dominant_kind
        # a kind never measured (should not happen: the suite has all three) costs like the dearest one
        per_layer = self.per_layer_s.get(kind, max(self.per_layer_s.values(), default=0.0))
        return self.once_s + self.graphs(features) * per_layer * max(features.layers, 1)

    def step_s(self, features: WorkFeatures, eager_step_s: float) -> float:
        kind = features.dominant_kind
        return self.step_ratio.get(kind, 1.0) * eager_step_s + self.step_overhead_s.get(kind, 0.0)


def fit_compile(
    samples: list[CompileSample], threads: int, torch_version: str, duration_s: float
) -> CompileCalibration:
    """Per kind of network: compile seconds per learnable layer (the mean over that kind's networks
    of one graph's compile time over its layers) and the step model (two networks: ratio and fixed
    overhead, by non-negative least squares; one: the ratio alone). `once_s` from the first
    network, whose first compile paid inductor's start-up on top of a graph."""
    import numpy as np

    from trainpilot.predict.fit import relative_nnls

    once = max(samples[0].first_compile_s - samples[0].recompile_s, 0.0) if samples else 0.0
    per_layer: dict[str, float] = {}
    ratio: dict[str, float] = {}
    overhead: dict[str, float] = {}
    for kind in KINDS:
        mine = [s for s in samples if s.kind == kind]
        if mine:
            per_layer[kind] = float(np.mean([s.recompile_s / max(sum(s.layers.values()), 1) for s in mine]))
        if len(mine) >= 2:
            coef, _ = relative_nnls(
                np.array([[s.eager_step_s, 1.0] for s in mine]),
                np.array([s.compiled_step_s for s in mine]),
                robust=False,
            )
            ratio[kind], overhead[kind] = float(coef[0]), float(coef[1])
        elif mine:
            ratio[kind], overhead[kind] = mine[0].compiled_step_s / mine[0].eager_step_s, 0.0
    return CompileCalibration(
        threads, float(once), per_layer, ratio, overhead, torch_version, tuple(samples), duration_s
    )


def bench_layers(spec: BenchSpec) -> dict[str, int]:
    """Learnable layers by kind of a micro-benchmark network (microbench.build_bench_model)."""
    if spec.kind == "conv":
        return {"conv": spec.layers - 1, "dense": 1}
    if spec.kind == "recurrent":
        return {"recurrent": spec.layers, "dense": 1}
    return {"dense": spec.layers}


def measure_compile(
    threads: int, specs: tuple[BenchSpec, ...] | None = None, progress: Progress | None = None
) -> CompileCalibration:
    """Compile and train each network (eager first, for the ratio), inductor's caches off."""
    import torch
    import torch._inductor.config as inductor_config

    from trainpilot.backends.compiled import compile_model
    from trainpilot.predict.microbench import COMPILE_SUITE, BenchTrainer, time_training_steps

    say = progress or (lambda _f, _m: None)
    specs = specs or COMPILE_SUITE
    started = time.perf_counter()
    previous = torch.get_num_threads()
    samples: list[CompileSample] = []
    try:
        torch.set_num_threads(threads)
        # warnings.catch_warnings: with the caches off torch warns that profile-guided
        # recompilation is off too, once per process, on the user's terminal
        with inductor_config.patch(force_disable_caches=True), warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            for i, spec in enumerate(specs):
                say(i / len(specs), f"{spec.name}: eager")
                eager, _first = time_training_steps(spec, threads, 0.1)
                say((i + 0.2) / len(specs), f"{spec.name}: compiling")
                bench = BenchTrainer(spec, wrap=compile_model)
                first = bench.timed()
                bench.timed(2)
                steady = min(bench.timed(3) for _ in range(3))  # compiled steps are regular; the least disturbed block
                say((i + 0.7) / len(specs), f"{spec.name}: recompiling for a smaller batch")
                recompile = bench.timed(batch=max(spec.batch // 2, 1))
                samples.append(
                    CompileSample(
                        spec.name,
                        spec.kind if spec.kind != "tiny" else "dense",
                        bench_layers(spec),
                        eager,
                        steady,
                        max(first - steady, 0.0),
                        max(recompile - steady, 0.0),
                    )
                )
    finally:
        torch.set_num_threads(previous)
        torch._dynamo.reset()
    say(1.0, f"measured torch.compile on {len(samples)} networks")
    return fit_compile(samples, threads, str(torch.__version__), time.perf_counter() - started)
