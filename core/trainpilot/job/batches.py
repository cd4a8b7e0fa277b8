"""The data forms a job can train on, each able to split off a validation set and hand out batches
by sample index:

- `TensorPairs`: `(X, y)` tensors or arrays in memory; a batch is one fancy index (no workers).
- `MapData`: a `torch.utils.data.Dataset` (or a DataLoader's), items fetched one by one and
  collated; a batch may be loaded in DataLoader worker processes (the plan says how many).
- the zoo's `data.Dataset` (path formats, the demo) has the same methods (job/data.py).

Inputs keep their dtype: token ids stay int64. Only float64 arrays become float32 (numpy's default
float, which no model's weights are).
"""

from __future__ import annotations

import pickle
import time
from collections.abc import Iterator
from typing import Any

import numpy as np
import torch

from trainpilot.errors import JobError, describe_exception

LOAD_PROBE_BATCHES = 3  # batches timed to measure the loading cost (after one untimed)
LOAD_PROBE_MAX_S = 2.0  # stop probing once this much time has gone


def split_indices(n: int, val_fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(train, validation) indices, deterministic for a seed: the same split `data.Dataset` makes."""
    n_val = int(round(n * val_fraction)) if n >= 10 else 0
    order = np.random.default_rng(seed).permutation(n)
    return np.sort(order[n_val:]), np.sort(order[:n_val])


def _as_tensor(values: Any) -> torch.Tensor:
    tensor = values if isinstance(values, torch.Tensor) else torch.as_tensor(np.asarray(values))
    if tensor.dtype == torch.float64:
        tensor = tensor.float()
    return tensor


class TensorPairs:
    """`(X, y)` in memory. `X`, `y` are tensors of the dtype they train in."""

    in_memory = True

    def __init__(self, X: Any, y: Any, source: str = "tensors", *, check: bool = True):
        self.X, self.y, self.source = _as_tensor(X), _as_tensor(y), source
        if check:
            if self.X.ndim == 0 or self.y.ndim == 0:
                raise JobError("data (X, y): X and y must have a sample dimension first")
            if len(self.X) != len(self.y):
                raise JobError(f"data (X, y): X has {len(self.X)} samples but y has {len(self.y)}")

    def __len__(self) -> int:
        return int(self.X.shape[0])

    @property
    def num_classes(self) -> int:
        if self.y.dtype.is_floating_point or len(self.y) == 0:
            return 0
        return int(self.y.max()) + 1

    @property
    def nbytes(self) -> int:
        return int(self.X.numel() * self.X.element_size() + self.y.numel() * self.y.element_size())

    @property
    def sample_shape(self) -> tuple[int, ...]:
        return tuple(int(d) for d in self.X.shape[1:])

    def split(self, val_fraction: float, seed: int) -> tuple[TensorPairs, TensorPairs]:
        train, val = split_indices(len(self), val_fraction, seed)
        return self.subset(train), self.subset(val)

    def subset(self, idx: np.ndarray) -> TensorPairs:
        at = torch.as_tensor(idx, dtype=torch.long)
        return TensorPairs(self.X[at], self.y[at], self.source, check=False)

    def batch(self, idx: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
        at = torch.as_tensor(idx, dtype=torch.long)
        return self.X[at], self.y[at]


class MapData:
    """A map-style `torch.utils.data.Dataset` seen through `indices` (its share of a split)."""

    in_memory = False

    def __init__(
        self,
        dataset: Any,
        *,
        collate_fn: Any = None,
        indices: np.ndarray | None = None,
        sampler: Any = None,
        source: str | None = None,
    ):
        from torch.utils.data import IterableDataset
        from torch.utils.data.dataloader import default_collate

        if isinstance(dataset, IterableDataset):
            raise JobError(
                f"data: {type(dataset).__name__} is an IterableDataset; TrainPilot needs a map-style Dataset"
                " (__len__ and __getitem__) to plan epochs and resume mid-epoch"
            )
        try:
            n = len(dataset)
        except TypeError:
            raise JobError(f"data: {type(dataset).__name__} has no len(); a Dataset needs __len__") from None
        self.dataset = dataset
        self.collate_fn = collate_fn or default_collate
        self.indices = np.arange(n) if indices is None else np.asarray(indices)
        self.sampler = sampler  # a DataLoader's own sampler (not Random/Sequential), drawn once per epoch
        self.source = source or type(dataset).__name__
        self._workers_reason: str | None | bool = False  # False: not checked yet
        self._loaders: dict[tuple[int, bool], tuple[Any, _Batches]] = {}  # (workers, pin) -> DataLoader

    def __len__(self) -> int:
        return len(self.indices)

    num_classes = 0
    nbytes = 0  # items are loaded as they are asked for; nothing is held in memory up front

    def split(self, val_fraction: float, seed: int) -> tuple[MapData, MapData]:
        train, val = split_indices(len(self), val_fraction, seed)
        return self.subset(train), self.subset(val, sampler=None)

    def subset(self, idx: np.ndarray, sampler: Any = "same") -> MapData:
        out = MapData(
            self.dataset,
            collate_fn=self.collate_fn,
            indices=self.indices[idx],
            sampler=self.sampler if sampler == "same" else sampler,
            source=self.source,
        )
        out._workers_reason = self._workers_reason
        return out

    def items(self, idx: np.ndarray) -> list[Any]:
        return [self.dataset[int(i)] for i in self.indices[idx]]

    def batch(self, idx: np.ndarray) -> Any:
        """One batch loaded in this process."""
        return self.collate_fn(self.items(idx))

    def sampled_order(self, seed: int, epoch: int) -> np.ndarray | None:
        """The user's sampler's order for `epoch` (positions into this subset), drawn under a
        seeded generator so a resumed run sees the same batches; None when there is no sampler."""
        if self.sampler is None:
            return None
        where = {int(v): i for i, v in enumerate(self.indices)}
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed * 1_000_003 + epoch)
            drawn = [where[int(i)] for i in self.sampler if int(i) in where]
        return np.asarray(drawn, dtype=np.int64)

    def workers_unavailable(self) -> str | None:
        """Why DataLoader workers cannot load this data (None: they can). Workers receive the
        dataset and the collate function pickled (always under spawn; macOS and Windows spawn)."""
        if self._workers_reason is False:
            try:
                pickle.dumps((self.dataset, self.collate_fn))
                self._workers_reason = _spawn_import_problem(self.dataset)
            except Exception as exc:  # noqa: BLE001 - whatever pickling raises, workers cannot have it
                self._workers_reason = f"the dataset cannot be pickled ({describe_exception(exc)})"
        return self._workers_reason  # type: ignore[return-value]

    def loader(self, batches: list[np.ndarray], workers: int, pin_memory: bool = False) -> Iterator[Any]:
        """Iterate `batches` (lists of positions), loaded by `workers` processes (0: this one).
        The workers persist from one call to the next (an epoch's, a restart mid-epoch): each call
        points the loader's batch sampler at its batches, so workers start once per worker count,
        not at every epoch (~40 ms each time, measured in docs/jobs.md)."""
        if workers <= 0:
            return (self.batch(b) for b in batches)
        from torch.utils.data import DataLoader

        key = (workers, pin_memory)
        if key not in self._loaders:
            sampler = _Batches()
            loader = DataLoader(
                self.dataset,
                batch_sampler=sampler,
                num_workers=workers,
                collate_fn=self.collate_fn,
                pin_memory=pin_memory,
                persistent_workers=True,
            )
            self._loaders[key] = (loader, sampler)
        loader, sampler = self._loaders[key]
        sampler.batches = [[int(i) for i in self.indices[b]] for b in batches]
        return iter(loader)

    def worker_pids(self) -> list[int]:
        """The processes its loaders keep (DataLoader's own iterator holds them: `_workers`)."""
        pids = []
        for loader, _sampler in self._loaders.values():
            iterator = getattr(loader, "_iterator", None)
            pids += [w.pid for w in getattr(iterator, "_workers", []) if w.pid is not None]
        return pids

    def close(self) -> None:
        """End the loaders' worker processes (a plan switch, the run's end)."""
        self._loaders.clear()


class _Batches:
    """A batch sampler whose batches are set before each iteration: an epoch's order, or its rest
    after a restart. It is iterated in the training process, so persistent workers follow it."""

    def __init__(self) -> None:
        self.batches: list[list[int]] = []

    def __iter__(self) -> Iterator[list[int]]:
        return iter(list(self.batches))

    def __len__(self) -> int:
        return len(self.batches)


def _spawn_import_problem(dataset: Any) -> str | None:
    """Why spawned workers could not rebuild `dataset` (None: they can, or workers fork). A spawned
    worker imports the dataset's class by its module's name: a class from a `--job` file (loaded
    under a private name) or from `__main__` of an interactive session is not importable there."""
    import importlib.machinery
    import multiprocessing
    import sys

    if multiprocessing.get_start_method(allow_none=True) in (None, "fork") and hasattr(__import__("os"), "fork"):
        return None
    module = type(dataset).__module__
    try:
        # on sys.path, as a fresh interpreter sees it: a module loaded from a file under a private
        # name (a --job file) sits in sys.modules, where importlib.util.find_spec would find it
        found = module != "__main__" and importlib.machinery.PathFinder.find_spec(module.split(".")[0]) is not None
    except (ImportError, ValueError):
        found = False
    if found or module.split(".")[0] in sys.builtin_module_names:
        return None
    return (
        f"workers start by spawn here and could not import {type(dataset).__name__} from '{module}'"
        " (define the Dataset in an importable module)"
    )


def resolve_data(data: Any, *, collate_fn: Any = None, what: str = "data") -> tuple[Any, dict[str, Any]]:
    """A job's `data` (or `val_data`) as one of the forms above, and what a DataLoader carried
    (`batch_size`, `workers`) for the job to take."""
    from torch.utils.data import DataLoader, Dataset, RandomSampler, SequentialSampler

    taken: dict[str, Any] = {}
    if isinstance(data, DataLoader):
        if data.batch_size is None:
            raise JobError(f"{what}: a DataLoader with a custom batch_sampler is not supported; pass its sampler")
        taken["batch_size"] = int(data.batch_size)
        taken["workers"] = int(data.num_workers)
        sampler = data.sampler
        taken["shuffle"] = not isinstance(sampler, SequentialSampler)
        own = None if isinstance(sampler, (RandomSampler, SequentialSampler)) else sampler
        return MapData(data.dataset, collate_fn=collate_fn or data.collate_fn, sampler=own), taken
    if isinstance(data, Dataset):
        return MapData(data, collate_fn=collate_fn), taken
    if isinstance(data, (tuple, list)) and len(data) == 2 and not isinstance(data, str):
        try:
            return TensorPairs(data[0], data[1]), taken
        except JobError as exc:
            raise JobError(exc.problem.replace("data", what, 1)) from None
        except Exception as exc:  # noqa: BLE001 - np.asarray of something that is not an array
            raise JobError(f"{what}: (X, y) must be tensors or arrays ({describe_exception(exc)})") from None
    if isinstance(data, (str, bytes)) or hasattr(data, "__fspath__"):
        from trainpilot.job.data import resolve_dataset

        return resolve_dataset(str(data)), taken
    if hasattr(data, "X") and hasattr(data, "y") and hasattr(data, "split"):  # a loaded data.Dataset
        return data, taken
    raise JobError(
        f"{what}: a {type(data).__name__} is not data TrainPilot can train on:"
        " give a torch Dataset, a DataLoader, a pair (X, y) of tensors or arrays, or a path"
    )


def measure_loading(data: Any, batch_size: int) -> float:
    """Seconds to load one batch in this process (items fetched and collated), the cost DataLoader
    workers could take off the training loop. In-memory tensors cost nothing the calibrated step
    does not already hold: 0."""
    if getattr(data, "in_memory", True) or len(data) == 0:
        return 0.0
    n = len(data)
    times: list[float] = []
    start_all = time.perf_counter()
    for i in range(LOAD_PROBE_BATCHES + 1):
        idx = np.arange(i * batch_size, (i + 1) * batch_size) % n
        start = time.perf_counter()
        data.batch(idx)
        if i:  # the first batch warms caches (file handles, lazy imports)
            times.append(time.perf_counter() - start)
        if time.perf_counter() - start_all > LOAD_PROBE_MAX_S and times:
            break
    return float(np.median(times)) if times else 0.0
