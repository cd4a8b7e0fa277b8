"""Feature caching for frozen-backbone training: run the backbone once over the data, in batches.

The backbone is frozen, so its output for a sample never changes: computing it once and training
the head on the cached features for every epoch is exact, not an approximation (as long as no
data augmentation runs before the backbone). The prediction function is the Core ML runtime on a
Mac; anything mapping a float32 batch to a float32 batch works, which keeps this logic testable.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import psutil

from trainpilot.errors import BackendUnavailable

PredictFn = Callable[[np.ndarray], np.ndarray]
ProgressFn = Callable[[int, int], None]  # (samples done, total)

# Cached features may take at most this share of the memory available when caching starts.
MEMORY_SHARE = 0.5


def feature_bytes(n_samples: int, output_shape: tuple[int, ...]) -> int:
    return int(n_samples) * math.prod(output_shape) * 4  # float32


def check_feature_memory(n_samples: int, output_shape: tuple[int, ...], available_bytes: int | None = None) -> None:
    """Refuse (with the figures) when the cache would not fit: a frozen first conv layer can
    output more bytes per sample than the input has, and swapping would erase any ANE gain."""
    need = feature_bytes(n_samples, output_shape)
    available = psutil.virtual_memory().available if available_bytes is None else available_bytes
    if need > MEMORY_SHARE * available:
        raise BackendUnavailable(
            f"cached features would need {need / 2**30:.2f} GiB for {n_samples} samples of shape {output_shape}, "
            f"more than half of the {available / 2**30:.2f} GiB available; freeze more layers"
        )


def _batch(inputs: Any, index: np.ndarray, sample_shape: tuple[int, ...]) -> np.ndarray:
    rows = np.asarray(inputs[index], dtype=np.float32)
    return rows.reshape(len(index), *sample_shape)


def cache_features(
    predict: PredictFn,
    inputs: Any,
    *,
    batch_size: int,
    sample_shape: tuple[int, ...],
    output_shape: tuple[int, ...],
    on_progress: ProgressFn | None = None,
) -> np.ndarray:
    """Features for every row of `inputs`, in order, computed `batch_size` rows at a time.

    `inputs` is a numpy array (N, *sample_shape) or anything with len() and __getitem__ on an
    index array (a memmap, a dataset view). The Core ML model has a fixed batch dimension, so the
    last, short batch is zero-padded and the padding's outputs are dropped.
    """
    n = len(inputs)
    out = np.empty((n, *output_shape), dtype=np.float32)
    for start in range(0, n, batch_size):
        index = np.arange(start, min(start + batch_size, n))
        batch = _batch(inputs, index, sample_shape)
        if len(index) < batch_size:
            padded = np.zeros((batch_size, *sample_shape), dtype=np.float32)
            padded[: len(index)] = batch
            batch = padded
        result = np.asarray(predict(batch), dtype=np.float32)
        if result.shape != (batch_size, *output_shape):
            raise RuntimeError(f"the backbone returned shape {result.shape}, expected {(batch_size, *output_shape)}")
        out[start : start + len(index)] = result[: len(index)]
        if on_progress is not None:
            on_progress(start + len(index), n)
    return out
