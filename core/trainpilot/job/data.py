"""Datasets: load and validate what the user points at, and make the bundled demo set.

Supported: a directory with X_train.npy/y_train.npy (or X.npy/y.npy), a .npz with X/y or
X_train/y_train, a directory of IDX files (MNIST names, gzipped or not), and a CSV file whose last
column is the label. Nothing from a data file is ever executed: .npy/.npz load with
`allow_pickle=False`, so an object array is refused instead of unpickled.

Every file is distrusted: a .npy header is checked against the file's real size before anything is
allocated, formats that are read into memory (labels, .npz, IDX, CSV, anything gzipped) are sized
first and refused with the predicted need when they would not fit, and anything unexpected from a
parser becomes a one-line DatasetError naming the file.
"""

from __future__ import annotations

import csv
import gzip
import io
import math
import struct
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from trainpilot.errors import DatasetError
from trainpilot.units import bytes_decimal

if TYPE_CHECKING:
    from numpy.typing import DTypeLike

DEMO_NAME = "demo"
MAX_CLASSES = 10_000
FLOAT32_MAX = float(np.finfo(np.float32).max)  # training runs in float32: larger values become inf
MEMORY_HEADROOM = 0.8  # load at most this share of the available memory; the model needs the rest
CSV_BYTES_PER_TEXT_BYTE = 6  # parsing keeps a Python float (~32 B with its list slot) per ~6-byte cell


def available_memory_bytes() -> int:
    """Memory the machine can still give this process without swapping."""
    import psutil

    return int(psutil.virtual_memory().available)


def check_fits_in_memory(need: int, path: object, what: str) -> None:
    """Refuse, with the predicted need, to load something that would not fit in memory."""
    available = available_memory_bytes()
    if need > available * MEMORY_HEADROOM:
        raise DatasetError(
            f"too large to load: {what} needs about {bytes_decimal(need)} of memory"
            f" and {bytes_decimal(available)} is available"
            " (X_train.npy/y_train.npy files are memory-mapped instead of loaded)",
            path,
        )


@dataclass(frozen=True)
class Dataset:
    X: np.ndarray  # float-like, (N, *sample_shape); may be a read-only memory map
    y: np.ndarray  # int64 class indices, (N,)
    source: str
    num_classes: int

    @property
    def sample_shape(self) -> tuple[int, ...]:
        return tuple(int(d) for d in self.X.shape[1:])

    def __len__(self) -> int:
        return int(self.X.shape[0])

    in_memory = True  # batches are one fancy index: no DataLoader workers (job/batches.py)

    @property
    def nbytes(self) -> int:
        return int(self.X.nbytes + self.y.nbytes)

    def batch(self, idx: np.ndarray) -> tuple[Any, Any]:
        """Samples `idx` as the zoo trains them: float32 inputs, int64 class indices."""
        import torch

        return torch.as_tensor(np.asarray(self.X[idx]), dtype=torch.float32), torch.as_tensor(self.y[idx])

    def subset(self, idx: np.ndarray) -> Dataset:
        """Samples `idx` as a dataset of their own (a rank's slice of the held-out set)."""
        rows = _take(self.X, idx) if isinstance(self.X, np.memmap) else self.X[idx]
        return Dataset(rows, self.y[idx], self.source, self.num_classes)

    def split(self, val_fraction: float = 0.1, seed: int = 0) -> tuple[Dataset, Dataset]:
        """A held-out validation split, deterministic for a seed. Index arrays, so memory maps stay lazy."""
        n = len(self)
        n_val = int(round(n * val_fraction)) if n >= 10 else 0
        order = np.random.default_rng(seed).permutation(n)
        val_idx, train_idx = np.sort(order[:n_val]), np.sort(order[n_val:])
        return (
            Dataset(_take(self.X, train_idx), self.y[train_idx], self.source, self.num_classes),
            Dataset(_take(self.X, val_idx), self.y[val_idx], self.source, self.num_classes),
        )


def _take(X: np.ndarray, idx: np.ndarray) -> np.ndarray:
    if isinstance(X, np.memmap) and len(idx) == X.shape[0] and np.array_equal(idx, np.arange(len(idx))):
        return X
    # LazyRows stands in for an ndarray (what a Dataset's X is used for), which its type cannot say
    return LazyRows(X, idx) if isinstance(X, np.memmap) else X[idx]  # type: ignore[return-value]


class LazyRows:
    """Rows of a memory-mapped array selected by index, read only when a batch asks for them, so a
    dataset larger than comfortable RAM is never loaded whole."""

    def __init__(self, base: np.ndarray, idx: np.ndarray):
        self.base, self.idx = base, idx
        self.shape = (len(idx), *base.shape[1:])
        self.dtype = base.dtype
        self.nbytes = int(len(idx) * math.prod(base.shape[1:]) * base.dtype.itemsize)
        self.ndim = base.ndim

    def __len__(self) -> int:
        return len(self.idx)

    def __getitem__(self, item: Any) -> np.ndarray:
        rows = self.idx[item]
        if np.ndim(rows) == 0:
            return np.asarray(self.base[int(rows)])
        order = np.argsort(rows)  # sorted reads are sequential on disk
        out = np.asarray(self.base[rows[order]])
        return out[np.argsort(order)]


# ---------------------------------------------------------------- loading


def load_dataset(path: str | Path) -> Dataset:
    """Load and validate a dataset. Raises DatasetError with the file and the problem."""
    path = Path(path).expanduser()
    if not path.exists():
        raise DatasetError("no such file or directory", path)
    try:
        if path.is_dir():
            X, y = _load_directory(path)
        elif path.suffix == ".npz":
            X, y = _load_npz(path)
        elif path.suffix.lower() in (".csv", ".txt") or path.name.endswith(".csv.gz"):
            X, y = _load_csv(path)
        else:
            raise DatasetError(
                "unknown dataset format (expected a directory of .npy or IDX files, a .npz or a .csv)", path
            )
        return validate(X, y, str(path))
    except DatasetError:
        raise
    except MemoryError as exc:
        raise DatasetError("too large to load into memory", path) from exc
    except Exception as exc:  # whatever a parser throws at a damaged file: one line, never a traceback
        raise DatasetError(f"cannot be read ({_describe(exc)})", path) from exc


def _describe(exc: BaseException) -> str:
    first = (str(exc).strip().splitlines() or [""])[0][:160]
    return f"{type(exc).__name__}: {first}" if first else type(exc).__name__


def _load_directory(path: Path) -> tuple[np.ndarray, np.ndarray]:
    for x_name, y_name in (("X_train.npy", "y_train.npy"), ("X.npy", "y.npy")):
        if (path / x_name).exists() or (path / y_name).exists():
            return _load_npy(path / x_name, mmap=True), _load_npy(path / y_name, mmap=False)
    images = _find(path, ("train-images-idx3-ubyte", "train-images.idx3-ubyte"))
    labels = _find(path, ("train-labels-idx1-ubyte", "train-labels.idx1-ubyte"))
    if images or labels:
        if not images:
            raise DatasetError("has IDX labels but no train-images-idx3-ubyte[.gz]", path)
        if not labels:
            raise DatasetError("has IDX images but no train-labels-idx1-ubyte[.gz]", path)
        return read_idx(images), read_idx(labels)
    raise DatasetError(
        "found no dataset here: expected X_train.npy + y_train.npy, X.npy + y.npy, or MNIST-style IDX files", path
    )


def _find(directory: Path, names: tuple[str, ...]) -> Path | None:
    for name in names:
        for candidate in (directory / name, directory / f"{name}.gz"):
            if candidate.is_file():
                return candidate
    return None


def _read_npy_header(handle: io.BufferedIOBase, path: Path) -> tuple[tuple[int, ...], np.dtype, int]:
    """(shape, dtype, header length) of a .npy stream, read without touching its data."""
    fmt = np.lib.format
    try:
        version = fmt.read_magic(handle)
        if version == (1, 0):
            shape, _fortran, dtype = fmt.read_array_header_1_0(handle)
        elif version == (2, 0):
            shape, _fortran, dtype = fmt.read_array_header_2_0(handle)
        else:  # 3.0: no public reader (nor a type stub)
            shape, _fortran, dtype = fmt._read_array_header(handle, version)  # type: ignore[attr-defined]
    except Exception as exc:  # ValueError, tokenize errors, UnicodeDecodeError, EOFError from a damaged header
        raise DatasetError(f"not a valid .npy array (bad header: {_describe(exc)})", path) from exc
    if dtype.hasobject:
        raise DatasetError("holds Python objects, which TrainPilot never unpickles", path)
    return tuple(int(d) for d in shape), dtype, handle.tell()


def _check_npy_size(shape: tuple[int, ...], dtype: np.dtype, data_bytes: int, path: Path) -> int:
    expected = math.prod(shape) * dtype.itemsize
    if data_bytes < expected:
        raise DatasetError(
            f"truncated: its header says {dtype} {shape} ({bytes_decimal(expected)}) but it holds"
            f" {bytes_decimal(data_bytes)} of data",
            path,
        )
    if data_bytes > expected:
        raise DatasetError(f"damaged: {data_bytes - expected} unexpected bytes after the {dtype} {shape} array", path)
    return expected


def _load_npy(path: Path, mmap: bool) -> np.ndarray:
    if not path.is_file():
        raise DatasetError("missing (it must sit beside its partner array)", path)
    with open(path, "rb") as handle:
        shape, dtype, header = _read_npy_header(handle, path)
    data_bytes = _check_npy_size(shape, dtype, path.stat().st_size - header, path)
    if not mmap:
        check_fits_in_memory(data_bytes + math.prod(shape) * 8, path, f"loading {dtype} {shape}")  # + its int64 copy
    try:
        # mmap keeps big feature arrays on disk; allow_pickle=False refuses object arrays (code).
        return np.load(path, mmap_mode="r" if mmap else None, allow_pickle=False)
    except ValueError as exc:
        pickled = "pickle" in str(exc) or "Python objects" in str(exc)
        problem = (
            "holds Python objects, which TrainPilot never unpickles" if pickled else f"not a valid .npy array ({exc})"
        )
        raise DatasetError(problem, path) from exc
    except (OSError, EOFError) as exc:
        raise DatasetError(f"not a valid .npy array ({exc})", path) from exc


def _check_npz_members(path: Path) -> None:
    """Check each array's header against its stored size and the total against free memory,
    before numpy allocates what a (possibly lying) header asks for."""
    need = 0
    with zipfile.ZipFile(path) as archive:
        for info in archive.infolist():
            if not info.filename.endswith(".npy"):
                continue
            with archive.open(info) as member:
                shape, dtype, header = _read_npy_header(member, path)  # type: ignore[arg-type]
            expected = math.prod(shape) * dtype.itemsize
            if info.file_size - header != expected:
                raise DatasetError(
                    f"damaged: member {info.filename} says {dtype} {shape} ({bytes_decimal(expected)}) but stores"
                    f" {bytes_decimal(max(info.file_size - header, 0))}",
                    path,
                )
            need += expected
    check_fits_in_memory(need * 2, path, f"loading its arrays ({bytes_decimal(need)}) with their float32/int64 copies")


def _load_npz(path: Path) -> tuple[np.ndarray, np.ndarray]:
    try:
        _check_npz_members(path)
        with np.load(path, allow_pickle=False) as archive:
            names = set(archive.files)
            for x_name, y_name in (("X_train", "y_train"), ("X", "y"), ("x_train", "y_train"), ("x", "y")):
                if {x_name, y_name} <= names:
                    return archive[x_name], archive[y_name]
    except DatasetError:
        raise
    except ValueError as exc:
        problem = (
            "holds Python objects, which TrainPilot never unpickles"
            if "pickle" in str(exc)
            else f"not a valid .npz archive ({_describe(exc)})"
        )
        raise DatasetError(problem, path) from exc
    except Exception as exc:  # zipfile.BadZipFile, OSError, EOFError, zlib errors
        raise DatasetError(f"not a valid .npz archive ({_describe(exc)})", path) from exc
    raise DatasetError(f"needs arrays X and y (or X_train and y_train); it has {sorted(names) or 'none'}", path)


_IDX_DTYPES: dict[int, DTypeLike] = {
    0x08: np.uint8,
    0x09: np.int8,
    0x0B: np.dtype(">i2"),
    0x0C: np.dtype(">i4"),
    0x0D: np.dtype(">f4"),
    0x0E: np.dtype(">f8"),
}


def _read_limited(path: Path, factor: float, what: str) -> bytes:
    """The file's bytes, gunzipped when it ends in .gz; refused before it outgrows memory (a small
    .gz can expand a thousandfold). `factor`: memory needed per byte read."""
    if not path.name.endswith(".gz"):
        check_fits_in_memory(int(path.stat().st_size * factor), path, what)
        return path.read_bytes()
    limit = int(available_memory_bytes() * MEMORY_HEADROOM / factor)
    try:
        with gzip.open(path, "rb") as handle:
            raw = handle.read(limit + 1)
    except (OSError, EOFError, zlib.error) as exc:  # BadGzipFile is an OSError; zlib.error is not
        raise DatasetError(f"not a valid gzip file ({_describe(exc)})", path) from exc
    if len(raw) > limit:
        check_fits_in_memory(int(len(raw) * factor), path, f"{what} (decompressed: more than {bytes_decimal(limit)})")
    return raw


def read_idx(path: Path) -> np.ndarray:
    """Read an IDX file (the MNIST format): magic 0x0000 TT DD, DD big-endian dimension sizes, data."""
    try:
        raw = _read_limited(path, 2.0, "loading the IDX file")
    except OSError as exc:
        raise DatasetError(f"cannot be read ({exc})", path) from exc
    if len(raw) < 4 or raw[0] != 0 or raw[1] != 0:
        raise DatasetError("not an IDX file (bad magic number)", path)
    type_code, ndim = raw[2], raw[3]
    if type_code not in _IDX_DTYPES or not 1 <= ndim <= 4:
        raise DatasetError(f"unsupported IDX type 0x{type_code:02x} or {ndim} dimensions", path)
    header = 4 + 4 * ndim
    if len(raw) < header:
        raise DatasetError("truncated IDX header", path)
    dims = struct.unpack(f">{ndim}I", raw[4:header])
    dtype = np.dtype(_IDX_DTYPES[type_code])
    expected = math.prod(dims) * dtype.itemsize
    if len(raw) - header != expected:
        raise DatasetError(f"IDX header says {dims} ({expected} bytes) but the file holds {len(raw) - header}", path)
    return np.frombuffer(raw, dtype=dtype, offset=header).reshape(dims)


def _load_csv(path: Path) -> tuple[np.ndarray, np.ndarray]:
    try:
        text = _read_limited(path, CSV_BYTES_PER_TEXT_BYTE, "parsing the CSV").decode()
    except (OSError, UnicodeDecodeError) as exc:
        raise DatasetError(f"cannot be read as text ({_describe(exc)})", path) from exc
    rows = [row for row in csv.reader(io.StringIO(text)) if row and any(cell.strip() for cell in row)]
    if not rows:
        raise DatasetError("is empty", path)
    if not _numeric(rows[0]):
        rows = rows[1:]  # a header line
    if not rows:
        raise DatasetError("has a header but no data rows", path)
    width = len(rows[0])
    if width < 2:
        raise DatasetError("needs at least one feature column and a label column", path)
    values = []
    for line_no, row in enumerate(rows, start=1):
        if len(row) != width:
            raise DatasetError(f"data row {line_no} has {len(row)} columns, expected {width}", path)
        try:
            values.append([float(cell) for cell in row])
        except ValueError:
            raise DatasetError(f"data row {line_no} has a non-numeric value", path) from None
    table = np.asarray(values, dtype=np.float64)
    return table[:, :-1].astype(np.float32), table[:, -1]


def _numeric(row: list[str]) -> bool:
    try:
        [float(cell) for cell in row]
        return True
    except ValueError:
        return False


# ---------------------------------------------------------------- validation


def validate(X: np.ndarray, y: np.ndarray, source: str) -> Dataset:
    """Check shapes, types, labels and values; return a Dataset with a channel axis where needed."""
    X, y = np.asarray(X) if not isinstance(X, np.memmap) else X, np.asarray(y)
    if X.dtype.kind not in "biuf":
        raise DatasetError(f"features must be numeric, got dtype {X.dtype}", source)
    if X.ndim < 2 or X.ndim > 4:
        raise DatasetError(f"features must be shaped (N, features...) with 2 to 4 axes, got {X.shape}", source)
    if X.shape[0] < 2:
        raise DatasetError(f"needs at least 2 samples, got {X.shape[0]}", source)
    if math.prod(X.shape[1:]) == 0:
        raise DatasetError(f"samples are empty (shape {X.shape})", source)
    if y.ndim == 2 and y.shape[1] == 1:
        y = y[:, 0]
    if y.ndim != 1:
        raise DatasetError(f"labels must be one class index per sample, got shape {y.shape}", source)
    if y.shape[0] != X.shape[0]:
        raise DatasetError(f"{X.shape[0]} samples but {y.shape[0]} labels", source)
    if y.dtype.kind not in "biuf":
        raise DatasetError(f"labels must be integers, got dtype {y.dtype}", source)
    if y.dtype.kind == "f":
        if not np.all(np.isfinite(y)) or not np.all(np.equal(np.mod(y, 1), 0)):
            raise DatasetError("labels must be whole numbers (class indices)", source)
    y = y.astype(np.int64)
    if y.min() < 0:
        raise DatasetError(f"labels must be class indices >= 0, found {int(y.min())}", source)
    num_classes = int(y.max()) + 1
    if num_classes > MAX_CLASSES:
        raise DatasetError(
            f"labels go up to {num_classes - 1}; more than {MAX_CLASSES} classes is not a classification set", source
        )
    if num_classes < 2:
        num_classes = 2  # a one-class set still trains a 2-way classifier; say nothing clever
    if X.dtype.kind == "f":
        # Check in chunks so a memory-mapped set is streamed, not loaded. Values beyond float32's
        # range are finite here but become inf in training, so they are refused too.
        wide = X.dtype.itemsize > 4
        for start in range(0, X.shape[0], 8192):
            chunk = np.asarray(X[start : start + 8192])
            if not np.all(np.isfinite(chunk)):
                raise DatasetError("features contain NaN or infinity", source)
            if wide and float(np.max(np.abs(chunk))) > FLOAT32_MAX:
                raise DatasetError(
                    f"features exceed the float32 range (|x| up to {float(np.max(np.abs(chunk))):.3g}); TrainPilot"
                    " trains in float32",
                    source,
                )
    if X.ndim == 3:
        X = X[:, None] if not isinstance(X, np.memmap) else X.reshape(X.shape[0], 1, *X.shape[1:])
    return Dataset(X, y, source, num_classes)


# ---------------------------------------------------------------- the bundled demo set


def demo_dataset(n: int = 2400, seed: int = 7) -> Dataset:
    """A deterministic, learnable 10-class set of 28x28 images: each class is a bar at its own
    angle and position plus noise. Small enough to train in seconds, hard enough that a linear
    guess does not hit 100%."""
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:28, 0:28].astype(np.float32)
    labels = np.arange(n) % 10
    rng.shuffle(labels)
    images = np.empty((n, 28, 28), dtype=np.float32)
    for i, label in enumerate(labels):
        angle = math.pi * label / 10 + rng.normal(0, 0.08)
        cx, cy = 14 + rng.normal(0, 2.0), 14 + rng.normal(0, 2.0)
        # distance of every pixel from a line through (cx, cy) at this angle
        dist = np.abs((xx - cx) * math.sin(angle) - (yy - cy) * math.cos(angle))
        along = np.abs((xx - cx) * math.cos(angle) + (yy - cy) * math.sin(angle))
        bar = np.exp(-(dist**2) / 3.0) * (along < 6 + (label % 3) * 2)
        images[i] = bar + rng.normal(0, 0.35, size=(28, 28))
    return Dataset(images[:, None], labels.astype(np.int64), DEMO_NAME, 10)


def write_demo_dataset(directory: str | Path, n: int = 2400, seed: int = 7) -> Path:
    directory = Path(directory).expanduser()
    directory.mkdir(parents=True, exist_ok=True)
    data = demo_dataset(n, seed)
    np.save(directory / "X_train.npy", data.X[:, 0])
    np.save(directory / "y_train.npy", data.y)
    return directory


def resolve_dataset(spec: str | Path | None) -> Dataset:
    """`None` or "demo" means the bundled demo set; anything else is a path."""
    if spec is None or str(spec) == DEMO_NAME:
        return demo_dataset()
    return load_dataset(spec)
