"""Valid files of every kind TrainPilot reads, and the ways to break them.

The mutations take explicit parameters, so hypothesis can draw them (and shrink a failure to the
smallest breaking change) while benchmarks/faults.py draws them from a seeded random generator.
Nothing here decides what a correct answer is; the tests and the benchmark do.
"""
from __future__ import annotations

import gzip
import io
import random
import struct
from pathlib import Path
from typing import Any, Callable

import numpy as np

DATASET_FORMATS = ("npy_x", "npy_y", "npz", "npz_compressed", "idx_images", "idx_labels", "idx_gz", "csv", "csv_gz")
MUTATIONS = ("truncate", "flip", "insert", "overwrite", "zero_header")


# ---------------------------------------------------------------- valid material


def valid_arrays(n: int = 24, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return rng.random((n, 4, 4), dtype=np.float32), (np.arange(n) % 3).astype(np.int64)


def npy_bytes(array: np.ndarray, allow_pickle: bool = False) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, array, allow_pickle=allow_pickle)
    return buffer.getvalue()


def npz_bytes(arrays: dict[str, np.ndarray], compressed: bool = False, allow_pickle: bool = False) -> bytes:
    buffer = io.BytesIO()
    if allow_pickle:  # savez pickles object arrays without asking
        np.savez(buffer, **arrays)
    else:
        (np.savez_compressed if compressed else np.savez)(buffer, **arrays)
    return buffer.getvalue()


def idx_bytes(array: np.ndarray) -> bytes:
    array = np.ascontiguousarray(array, dtype=np.uint8)
    return struct.pack(">HBB", 0, 0x08, array.ndim) + struct.pack(f">{array.ndim}I", *array.shape) + array.tobytes()


def csv_bytes(X: np.ndarray, y: np.ndarray, header: bool = True) -> bytes:
    flat = X.reshape(len(X), -1)
    lines = [",".join([f"f{i}" for i in range(flat.shape[1])] + ["label"])] if header else []
    lines += [",".join(f"{v:.4f}" for v in row) + f",{label}" for row, label in zip(flat, y)]
    return ("\n".join(lines) + "\n").encode()


# ---------------------------------------------------------------- byte mutations


def mutate(raw: bytes, kind: str, position: float, size: int, seed: int) -> bytes:
    """One damaging edit. position in [0, 1) picks where; size how much; seed the junk bytes."""
    data = bytearray(raw)
    if not data:
        return bytes(data)
    at = min(int(position * len(data)), len(data) - 1)
    junk = random.Random(seed).randbytes(max(size, 1))
    if kind == "truncate":
        return bytes(data[:at])
    if kind == "flip":  # `size` bit flips spread from `at`
        rng = random.Random(seed)
        for i in range(max(size, 1)):
            where = (at + i * 97) % len(data)
            data[where] ^= 1 << rng.randrange(8)
        return bytes(data)
    if kind == "insert":
        return bytes(data[:at] + junk + data[at:])
    if kind == "overwrite":
        data[at : at + len(junk)] = junk
        return bytes(data[: len(raw)])
    if kind == "zero_header":  # the first bytes, where every format keeps its header
        head = min(len(data), 16 + size)
        start = int(position * head)
        data[start:head] = bytes(head - start)
        return bytes(data)
    raise ValueError(kind)


def random_mutation(rng: random.Random) -> tuple[str, float, int, int]:
    return rng.choice(MUTATIONS), rng.random(), rng.choice((1, 2, 4, 16, 64)), rng.randrange(2**31)


# ---------------------------------------------------------------- datasets on disk


def write_dataset(fmt: str, directory: Path, damage: Callable[[bytes], bytes] = lambda b: b) -> Path:
    """Write a small valid dataset in `fmt`, passing the one damaged file's bytes through `damage`;
    returns what --dataset should point at."""
    directory.mkdir(parents=True, exist_ok=True)
    X, y = valid_arrays()
    if fmt in ("npy_x", "npy_y"):
        (directory / "X_train.npy").write_bytes(damage(npy_bytes(X)) if fmt == "npy_x" else npy_bytes(X))
        (directory / "y_train.npy").write_bytes(damage(npy_bytes(y)) if fmt == "npy_y" else npy_bytes(y))
        return directory
    if fmt in ("npz", "npz_compressed"):
        path = directory / "data.npz"
        path.write_bytes(damage(npz_bytes({"X": X, "y": y}, compressed=fmt == "npz_compressed")))
        return path
    if fmt in ("idx_images", "idx_labels", "idx_gz"):
        images, labels = idx_bytes((X * 255).astype(np.uint8)), idx_bytes(y.astype(np.uint8))
        if fmt == "idx_gz":
            (directory / "train-images-idx3-ubyte.gz").write_bytes(damage(gzip.compress(images, mtime=0)))
            (directory / "train-labels-idx1-ubyte.gz").write_bytes(gzip.compress(labels, mtime=0))
        else:
            (directory / "train-images-idx3-ubyte").write_bytes(damage(images) if fmt == "idx_images" else images)
            (directory / "train-labels-idx1-ubyte").write_bytes(damage(labels) if fmt == "idx_labels" else labels)
        return directory
    if fmt == "csv":
        path = directory / "data.csv"
        path.write_bytes(damage(csv_bytes(X, y)))
        return path
    if fmt == "csv_gz":
        path = directory / "data.csv.gz"
        path.write_bytes(damage(gzip.compress(csv_bytes(X, y), mtime=0)))
        return path
    raise ValueError(fmt)


def write_arrays(directory: Path, X: Any, y: Any, container: str) -> Path:
    """Save X and y as a dataset in `directory`: "npy" (X_train.npy + y_train.npy, the directory is
    the dataset) or "npz" (data.npz). Returns what to pass as --dataset."""
    if container == "npy":
        np.save(directory / "X_train.npy", X)
        np.save(directory / "y_train.npy", y)
        return directory
    target = directory / "data.npz"
    np.savez(target, X=X, y=y)
    return target


def bad_array_cases() -> list[tuple[str, Any, Any]]:
    """(name, X, y) pairs that are well-formed files holding the wrong content."""
    X, y = valid_arrays()
    nan = X.copy()
    nan[3, 1, 1] = np.nan
    inf = X.copy()
    inf[0, 0, 0] = -np.inf
    return [
        ("nan features", nan, y),
        ("inf features", inf, y),
        ("float64 beyond float32", X.astype(np.float64) * 1e300, y),
        ("complex features", X.astype(np.complex64), y),
        ("string features", X.astype(str), y),
        ("datetime features", np.zeros((24, 4), dtype="datetime64[s]"), y),
        ("structured features", np.zeros(24, dtype=[("a", "f4"), ("b", "f4")]), y),
        ("1-d features", X[:, 0, 0], y),
        ("5-d features", X.reshape(24, 1, 2, 2, 4), y),
        ("empty samples", np.zeros((24, 0), np.float32), y),
        ("one sample", X[:1], y[:1]),
        ("no samples", X[:0], y[:0]),
        ("fewer labels", X, y[:-1]),
        ("more labels", X[:-1], y),
        ("negative label", X, np.where(np.arange(24) == 5, -1, y)),
        ("fractional labels", X, y + 0.5),
        ("nan label", X, np.where(np.arange(24) == 2, np.nan, y.astype(np.float64))),
        ("2-d labels", X, np.stack([y, y], axis=1)),
        ("string labels", X, y.astype(str)),
        ("huge label", X, np.where(np.arange(24) == 0, 10**9, y)),
        ("uint64 label wraps", X, np.where(np.arange(24) == 0, np.uint64(2**63 + 5), y.astype(np.uint64))),
    ]


def npy_with_header(shape: tuple[int, ...], dtype: str, body: bytes) -> bytes:
    """A .npy file whose header says anything, followed by `body`: a liar's header."""
    header = "{'descr': %r, 'fortran_order': False, 'shape': %r, }" % (dtype, shape)
    header = header + " " * ((64 - (10 + len(header) + 1) % 64) % 64) + "\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode("latin1") + body


# ---------------------------------------------------------------- things that must never run


class Tripwire:
    """Unpickling this creates `marker` (a file): proof that something executed pickled code."""

    def __init__(self, marker: Path):
        self.marker = str(marker)

    def __reduce__(self):  # type: ignore[no-untyped-def]
        return (open, (self.marker, "w"))


def pickle_payloads(marker: Path) -> dict[str, bytes]:
    """Files that run code when unpickled, one per place a pickle could hide."""
    import pickle

    import torch

    wire = Tripwire(marker)
    obj = np.empty(24, dtype=object)
    obj[:] = [wire] * 24
    buffer = io.BytesIO()
    torch.save({"model_state": {"w": wire}, "optimizer_state": {}, "epoch": 1, "step": 0, "config": {}, "format_version": 1}, buffer)
    return {
        "X_train.npy": npy_bytes(obj, allow_pickle=True),
        "data.npz": npz_bytes({"X": obj, "y": np.zeros(24, np.int64)}, allow_pickle=True),
        "latest.pt": buffer.getvalue(),
        "legacy.pt": pickle.dumps({"model_state": wire}),
    }


# ---------------------------------------------------------------- user model files (code, by design)

MODEL_FILES: dict[str, tuple[str, str]] = {
    # name: (source, class name)
    "syntax error": ("class Net(:\n    pass\n", "Net"),
    "raises on import": ("raise RuntimeError('model file exploded')\n", "Net"),
    "exits on import": ("import sys\nsys.exit(3)\n", "Net"),
    "imports a missing module": ("import module_that_does_not_exist\n", "Net"),
    "no such class": ("import torch\nclass Other(torch.nn.Module):\n    pass\n", "Net"),
    "not a module": ("class Net:\n    pass\n", "Net"),
    "constructor needs arguments": ("import torch\nclass Net(torch.nn.Module):\n    def __init__(self, width):\n        super().__init__()\n", "Net"),
    "forward raises": ("import torch\nclass Net(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.l = torch.nn.Linear(3, 2)\n    def forward(self, x):\n        return self.l(x)\n", "Net"),
    "wrong output shape": ("import torch\nclass Net(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.l = torch.nn.Linear(16, 3)\n    def forward(self, x):\n        return self.l(x.flatten(1)).sum()\n", "Net"),
    "one logit": ("import torch\nclass Net(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.l = torch.nn.Linear(16, 1)\n    def forward(self, x):\n        return self.l(x.flatten(1))\n", "Net"),
    "binary garbage": ("\x00\x01\x02\xff", "Net"),
}
