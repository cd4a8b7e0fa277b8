"""The jobs of benchmarks/unseen.py: drawn from a seed, written as a user outside this project
writes a job file (plain torch modules and tensors, a `make_job()` that returns `trainpilot.Job`).

`draw_jobs(seed, n)` gives the same specs for the same seed on every machine: it uses only
`random.Random` streams named by the seed (never torch's or numpy's global state), and nothing it
draws depends on the machine. What does depend on the machine (how many epochs fill a job's drawn duration) is sized
afterwards by the benchmark, from a quick measurement of the job's own step; the sized sample count
and epochs are then written into the job file, beside the drawn spec.

Kinds: classification MLPs (some with Dropout), CNNs with and without BatchNorm, LSTMs on float
sequences, Transformer encoders on int64 tokens, regression MLPs with MSE. Each draws its width,
depth, input shape, batch size (8 to 512), data size and optimizer. A step's work is capped, so a
job of 10-40 s has tens of steps or more: one step of seconds would leave the closed loop nothing to
watch, and no user trains that way on a 2-core machine.
"""

from __future__ import annotations

import math
import random
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

KINDS = ("mlp", "cnn", "cnn_bn", "lstm", "transformer", "regression")
FULL_SECONDS = (10.0, 40.0)  # how long a job's run should last (the default plan's), drawn per job
QUICK_SECONDS = (3.0, 5.0)
BATCHES = (8, 512)
MAX_STEP_FLOPS = 6e9  # forward + backward of one batch; a few tenths of a second on 2 cores
MAX_DATA_FLOATS = 12_000_000  # the data set in memory: ~48 MB of float32
LOAD_SPAN = (0.2, 0.5)  # the busy core's share of a loaded run's steps


@dataclass(frozen=True)
class JobSpec:
    seed: int
    index: int  # 1-based
    kind: str
    width: int  # hidden units, base channels, LSTM hidden size or d_model
    depth: int  # hidden layers, conv layers, LSTM layers or encoder layers
    batch: int
    samples: int  # drawn data size (the sized one is written into the job file)
    seconds: float  # how long the default plan's run should last
    optimizer: str  # adam | adamw | sgd
    shape: dict[str, Any] = field(default_factory=dict)  # the kind's own figures (features, classes, ...)
    loaded: bool = False  # a busy core arrives during its loaded runs
    load_start: float = 0.0  # fraction of the run's steps before the busy core arrives
    load_span: float = 0.0  # fraction of the run's steps it stays for

    @property
    def name(self) -> str:
        return f"unseen-{self.seed}-{self.index:02d}-{self.kind}"

    @property
    def file_name(self) -> str:
        return f"job_{self.index:02d}_{self.kind}.py"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def describe(self) -> str:
        """One line a person reads: what the model is, on what data, how it trains."""
        s = self.shape
        if self.kind in ("mlp", "regression"):
            what = (
                f"{'MLP' if self.kind == 'mlp' else 'regression MLP'}, {self.depth} x {self.width}"
                f" {s['activation'] if self.kind == 'regression' else 'ReLU'} on {s['features']} features"
                + (f", dropout {s['dropout']}" if s.get("dropout") else "")
                + (f", {s['classes']} classes" if self.kind == "mlp" else f", {s['outputs']} output(s), MSE")
            )
        elif self.kind in ("cnn", "cnn_bn"):
            what = (
                f"CNN{' + BatchNorm' if self.kind == 'cnn_bn' else ''}, {self.depth} conv layers from"
                f" {self.width} channels, {s['channels']}x{s['size']}x{s['size']} images, {s['classes']} classes"
            )
        elif self.kind == "lstm":
            what = (
                f"LSTM, {self.depth} layer(s) of {self.width} on {s['seq_len']} steps x {s['features']} features,"
                f" {s['classes']} classes"
            )
        else:
            what = (
                f"Transformer encoder, {self.depth} layer(s), d_model {self.width}, {s['heads']} heads,"
                f" ff {s['ff']}, {s['seq_len']} int64 tokens of {s['vocab']}, {s['classes']} classes"
            )
        load = f"; busy core over {self.load_start:.0%}-{self.load_start + self.load_span:.0%} of the steps"
        return f"{what}; batch {self.batch}, {self.samples} samples, {self.optimizer}, ~{self.seconds:.0f} s" + (
            load if self.loaded else ""
        )


# ---------------------------------------------------------------- drawing


def _log_int(rng: random.Random, low: float, high: float, step: int = 1) -> int:
    value = math.exp(rng.uniform(math.log(low), math.log(high)))
    return max(int(low), int(round(value / step)) * step)


def _shape(rng: random.Random, kind: str) -> tuple[int, int, dict[str, Any]]:
    """(width, depth, the kind's own figures)."""
    if kind == "mlp":
        shape = {"features": _log_int(rng, 16, 1024, 8), "classes": rng.randint(2, 100)}
        shape["dropout"] = rng.choice((0.1, 0.2)) if rng.random() < 0.3 else 0.0
        return _log_int(rng, 32, 2048, 16), rng.randint(1, 5), shape
    if kind == "regression":
        shape = {
            "features": _log_int(rng, 4, 256),
            "outputs": rng.choice((1, 1, 2, 4, 8)),
            "activation": rng.choice(("ReLU", "Tanh", "GELU", "SiLU")),
        }
        return _log_int(rng, 16, 1024, 8), rng.randint(1, 4), shape
    if kind in ("cnn", "cnn_bn"):
        shape = {
            "channels": rng.choice((1, 3)),
            "size": rng.choice((16, 24, 32)),
            "classes": rng.choice((10, 10, 20, 100)),
        }
        return _log_int(rng, 8, 64, 4), rng.randint(2, 5), shape
    if kind == "lstm":
        shape = {"features": _log_int(rng, 4, 64), "seq_len": _log_int(rng, 8, 64), "classes": rng.randint(2, 20)}
        return _log_int(rng, 16, 256, 8), rng.randint(1, 3), shape
    if kind == "transformer":
        width = rng.choice((32, 64, 96, 128, 192, 256))
        heads = rng.choice([h for h in (2, 4, 8) if width % h == 0])
        shape = {
            "vocab": _log_int(rng, 200, 5000, 10),
            "seq_len": _log_int(rng, 16, 128, 8),
            "heads": heads,
            "ff": width * rng.choice((2, 4)),
            "classes": rng.randint(2, 10),
        }
        return width, rng.randint(1, 4), shape
    raise ValueError(f"unknown kind {kind!r}")


def forward_flops(kind: str, width: int, depth: int, shape: dict[str, Any]) -> float:
    """A rough count of one sample's forward pass (multiply-adds x 2): enough to cap a step's work."""
    s = shape
    if kind in ("mlp", "regression"):
        out = s.get("classes") or s.get("outputs", 1)
        return 2.0 * (s["features"] * width + (depth - 1) * width * width + width * out)
    if kind in ("cnn", "cnn_bn"):
        flops, cin, size = 0.0, s["channels"], s["size"]
        for i in range(depth):
            cout = width * 2 ** (i // 2)
            flops += 2.0 * 9 * cin * cout * size * size
            cin = cout
            if i % 2 == 1:
                size //= 2
        return flops
    if kind == "lstm":
        first = 8.0 * (s["features"] * width + width * width)
        return s["seq_len"] * (first + (depth - 1) * 8.0 * 2 * width * width)
    t = s["seq_len"]
    per_token = depth * (8.0 * width * width + 4.0 * width * s["ff"] + 4.0 * t * width)
    return t * per_token


def sample_floats(kind: str, shape: dict[str, Any]) -> int:
    """float32 values one sample holds in memory (its input; targets are small)."""
    s = shape
    if kind in ("cnn", "cnn_bn"):
        return s["channels"] * s["size"] * s["size"]
    if kind == "lstm":
        return s["seq_len"] * s["features"]
    if kind == "transformer":
        return 2 * s["seq_len"]  # int64 tokens: two float32's worth each
    return s["features"] + s.get("outputs", 1)


def _draw_one(rng: random.Random, seed: int, index: int, kind: str, seconds: tuple[float, float]) -> JobSpec:
    batch = _log_int(rng, *BATCHES)
    batch = max(8, min(512, 2 ** round(math.log2(batch)) if rng.random() < 0.7 else batch // 8 * 8))
    for _ in range(100):  # a draw whose step is too costly is drawn again (same kind, same batch)
        width, depth, shape = _shape(rng, kind)
        if 3.0 * batch * forward_flops(kind, width, depth, shape) <= MAX_STEP_FLOPS:
            break
    else:  # pragma: no cover - a hundred costly draws in a row: shrink the last one
        while width > 8 and 3.0 * batch * forward_flops(kind, width, depth, shape) > MAX_STEP_FLOPS:
            width //= 2
    samples = _log_int(rng, max(2048, 8 * batch), 16384, 64)
    samples = max(4 * batch, min(samples, MAX_DATA_FLOATS // sample_floats(kind, shape)))
    optimizer = rng.choice(("adam", "adam", "adamw", "sgd"))
    return JobSpec(
        seed=seed,
        index=index,
        kind=kind,
        width=width,
        depth=depth,
        batch=batch,
        samples=samples,
        seconds=round(math.exp(rng.uniform(math.log(seconds[0]), math.log(seconds[1]))), 1),
        optimizer=optimizer,
        shape=shape,
    )


def draw_jobs(
    seed: int, n: int, quick: bool = False, seconds: tuple[float, float] | None = None, loaded: int | None = None
) -> list[JobSpec]:
    """`n` job specs from `seed`: the kinds in a shuffled cycle (so 12 jobs hold each kind twice),
    and a third of the jobs (rounded, at least one of two or more; `loaded` to choose) with a busy
    core arriving at a drawn point of the run for a drawn 20-50 % of its steps. `seconds`: the range
    each job's duration is drawn from, instead of 10-40 s (--quick: 3-5 s)."""
    cycles = random.Random(f"unseen-{seed}-kinds")
    kinds: list[str] = []
    while len(kinds) < n:
        cycle = list(KINDS)
        cycles.shuffle(cycle)
        kinds += cycle
    seconds = seconds or (QUICK_SECONDS if quick else FULL_SECONDS)
    # each job from its own stream: job i is the same whatever n, --quick or the duration range
    specs = [
        _draw_one(random.Random(f"unseen-{seed}-{i + 1}"), seed, i + 1, kind, seconds)
        for i, kind in enumerate(kinds[:n])
    ]
    count = loaded_count(n) if loaded is None else loaded
    picked = set(random.Random(f"unseen-{seed}-loaded-{n}").sample(range(n), min(n, count)))
    out = []
    for i, spec in enumerate(specs):
        if i in picked:
            rng = random.Random(f"unseen-{seed}-{i + 1}-load")
            span = round(rng.uniform(*LOAD_SPAN), 3)
            start = round(rng.uniform(0.05, 0.95 - span), 3)
            spec = replace(spec, loaded=True, load_start=start, load_span=span)
        out.append(spec)
    return out


def loaded_count(n: int) -> int:
    return max(1, round(n / 3)) if n >= 2 else 0


# ---------------------------------------------------------------- the job file

_HEADER = '''"""{title}

    trainpilot headless plan --job {file}:make_job --epochs {epochs}
    trainpilot headless run  --job {file}:make_job --epochs {epochs}

Written by benchmarks/unseen.py (seed {seed}, job {index}): {description}.{sized}
"""

import torch
from torch import nn

import trainpilot

{constants}
'''

_MODELS = {
    "mlp": """

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        layers, width = [], FEATURES
        for _ in range(DEPTH):
            layers += [nn.Linear(width, WIDTH), nn.ReLU()]
            if DROPOUT:
                layers.append(nn.Dropout(DROPOUT))
            width = WIDTH
        self.body = nn.Sequential(*layers)
        self.head = nn.Linear(width, CLASSES)

    def forward(self, x):
        return self.head(self.body(x))


def data():
    g = torch.Generator().manual_seed(DATA_SEED)
    y = torch.randint(0, CLASSES, (SAMPLES,), generator=g)
    centres = torch.randn(CLASSES, FEATURES, generator=g)
    X = centres[y] + 1.5 * torch.randn(SAMPLES, FEATURES, generator=g)
    return X, y
""",
    "regression": """

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        layers, width = [], FEATURES
        for _ in range(DEPTH):
            layers += [nn.Linear(width, WIDTH), getattr(nn, ACTIVATION)()]
            width = WIDTH
        self.body = nn.Sequential(*layers)
        self.head = nn.Linear(width, OUTPUTS)

    def forward(self, x):
        return self.head(self.body(x))


def data():
    g = torch.Generator().manual_seed(DATA_SEED)
    X = torch.randn(SAMPLES, FEATURES, generator=g)
    w = torch.randn(FEATURES, OUTPUTS, generator=g) / FEATURES**0.5
    y = torch.sin(3 * X @ w) + 0.1 * torch.randn(SAMPLES, OUTPUTS, generator=g)
    return X, y
""",
    "cnn": """

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        layers, cin = [], CHANNELS
        for i in range(DEPTH):
            cout = WIDTH * 2 ** (i // 2)
            layers.append(nn.Conv2d(cin, cout, 3, padding=1, bias=not BATCHNORM))
            if BATCHNORM:
                layers.append(nn.BatchNorm2d(cout))
            layers.append(nn.ReLU())
            if i % 2 == 1:
                layers.append(nn.MaxPool2d(2))
            cin = cout
        self.features = nn.Sequential(*layers)
        self.head = nn.Linear(cin, CLASSES)

    def forward(self, x):
        return self.head(self.features(x).mean(dim=(2, 3)))


def data():
    g = torch.Generator().manual_seed(DATA_SEED)
    y = torch.randint(0, CLASSES, (SAMPLES,), generator=g)
    patterns = torch.randn(CLASSES, CHANNELS, SIZE, SIZE, generator=g)
    X = patterns[y] + 1.5 * torch.randn(SAMPLES, CHANNELS, SIZE, SIZE, generator=g)
    return X, y
""",
    "lstm": """

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(FEATURES, WIDTH, num_layers=DEPTH, batch_first=True)
        self.head = nn.Linear(WIDTH, CLASSES)

    def forward(self, x):
        out, _ = self.lstm(x)
        return self.head(out[:, -1])


def data():
    g = torch.Generator().manual_seed(DATA_SEED)
    y = torch.randint(0, CLASSES, (SAMPLES,), generator=g)
    signals = torch.randn(CLASSES, SEQ_LEN, FEATURES, generator=g)
    X = signals[y] + 1.5 * torch.randn(SAMPLES, SEQ_LEN, FEATURES, generator=g)
    return X, y
""",
    "transformer": """

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, WIDTH)
        self.position = nn.Parameter(torch.zeros(1, SEQ_LEN, WIDTH))
        layer = nn.TransformerEncoderLayer(WIDTH, HEADS, dim_feedforward=FF, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, DEPTH, enable_nested_tensor=False)
        self.head = nn.Linear(WIDTH, CLASSES)

    def forward(self, tokens):
        return self.head(self.encoder(self.embed(tokens) + self.position).mean(dim=1))


def data():
    g = torch.Generator().manual_seed(DATA_SEED)
    tokens = torch.randint(0, VOCAB, (SAMPLES, SEQ_LEN), generator=g)  # int64, as a tokenizer gives them
    y = tokens[:, :4].sum(dim=1) % CLASSES
    return tokens, y
""",
}
_MODELS["cnn_bn"] = _MODELS["cnn"]

_OPTIMIZERS = {
    "adam": "torch.optim.Adam(params, lr=1e-3)",
    "adamw": "torch.optim.AdamW(params, lr=1e-3, weight_decay=0.01)",
    "sgd": "torch.optim.SGD(params, lr=0.01, momentum=0.9)",
}

_MAKE_JOB = """

def make_job():
    return trainpilot.Job(
        Net,
        data(),
        loss={loss},
        optimizer=lambda params: {optimizer},
        batch_size=BATCH,
        metric={metric},
        name="{name}",
    )
"""


def job_constants(spec: JobSpec, samples: int) -> dict[str, Any]:
    s = spec.shape
    out: dict[str, Any] = {"SAMPLES": samples, "BATCH": spec.batch, "WIDTH": spec.width, "DEPTH": spec.depth}
    if spec.kind in ("mlp", "regression", "lstm"):
        out["FEATURES"] = s["features"]
    if spec.kind == "mlp":
        out["DROPOUT"] = s["dropout"]
    if spec.kind == "regression":
        out.update(OUTPUTS=s["outputs"], ACTIVATION=s["activation"])
    if spec.kind in ("cnn", "cnn_bn"):
        out.update(CHANNELS=s["channels"], SIZE=s["size"], BATCHNORM=spec.kind == "cnn_bn")
    if spec.kind in ("lstm", "transformer"):
        out["SEQ_LEN"] = s["seq_len"]
    if spec.kind == "transformer":
        out.update(VOCAB=s["vocab"], HEADS=s["heads"], FF=s["ff"])
    if "classes" in s:
        out["CLASSES"] = s["classes"]
    out["DATA_SEED"] = 1000 * spec.seed + spec.index
    return out


def job_source(spec: JobSpec, samples: int | None = None, epochs: int | None = None) -> str:
    """The job file's text: what a user would write for this job."""
    samples = spec.samples if samples is None else samples
    constants = "\n".join(
        f'{k} = "{v}"' if isinstance(v, str) else f"{k} = {v!r}" for k, v in job_constants(spec, samples).items()
    )
    sized = "" if epochs is None else f"\nSized here: {samples} samples (SAMPLES), {epochs} epoch(s)."
    regression = spec.kind == "regression"
    return (
        _HEADER.format(
            title=f"An unseen job: {spec.kind}, drawn from seed {spec.seed}.",
            file=spec.file_name,
            epochs=epochs if epochs is not None else "N",
            seed=spec.seed,
            index=spec.index,
            description=spec.describe(),
            sized=sized,
            constants=constants,
        )
        + _MODELS[spec.kind]
        + _MAKE_JOB.format(
            loss="nn.MSELoss()" if regression else "nn.CrossEntropyLoss()",
            optimizer=_OPTIMIZERS[spec.optimizer],
            metric="None" if regression else '"accuracy"',
            name=spec.name,
        )
    )


def write_job(spec: JobSpec, folder: Path, samples: int | None = None, epochs: int | None = None) -> Path:
    path = Path(folder) / spec.file_name
    path.write_text(job_source(spec, samples, epochs))
    return path
