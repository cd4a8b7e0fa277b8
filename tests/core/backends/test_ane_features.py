"""Batched feature caching: order, padding of the last batch, array-like inputs, memory refusal."""
from __future__ import annotations

import numpy as np
import pytest

from trainpilot.backends.ane.features import cache_features, check_feature_memory, feature_bytes
from trainpilot.errors import BackendUnavailable

SAMPLE = (2, 3)


class Recorder:
    """A stand-in for the Core ML model (tests only): a fixed-batch linear map that records calls."""

    def __init__(self, batch_size: int):
        self.batch_size = batch_size
        self.batches: list[np.ndarray] = []
        self.weight = np.arange(6 * 4, dtype=np.float32).reshape(6, 4) / 10

    def __call__(self, batch: np.ndarray) -> np.ndarray:
        assert batch.shape == (self.batch_size, *SAMPLE), "the Core ML model has a fixed batch shape"
        assert batch.dtype == np.float32
        self.batches.append(batch.copy())
        return batch.reshape(self.batch_size, 6) @ self.weight


class RowsOnly:
    """Array-like without .shape: supports len() and indexing by an index array (like a dataset)."""

    def __init__(self, data: np.ndarray):
        self.data = data
        self.requests: list[np.ndarray] = []

    def __len__(self) -> int:
        return len(self.data)

    def __getitem__(self, index: np.ndarray) -> list[list[list[float]]]:
        self.requests.append(np.asarray(index))
        return self.data[index].tolist()


@pytest.mark.parametrize("n", [1, 7, 8, 9, 20])
def test_features_match_row_by_row_and_the_last_batch_is_padded(n: int) -> None:
    x = np.random.default_rng(n).normal(size=(n, *SAMPLE)).astype(np.float32)
    model = Recorder(batch_size=8)
    progress: list[tuple[int, int]] = []
    out = cache_features(model, x, batch_size=8, sample_shape=SAMPLE, output_shape=(4,), on_progress=lambda d, t: progress.append((d, t)))
    assert out.shape == (n, 4) and out.dtype == np.float32
    np.testing.assert_allclose(out, x.reshape(n, 6) @ model.weight, rtol=1e-6)
    assert len(model.batches) == -(-n // 8)
    tail = n % 8
    if tail:
        assert not model.batches[-1][tail:].any(), "padding rows are zeros"
    assert progress[-1] == (n, n) and [d for d, _ in progress] == sorted(d for d, _ in progress)


def test_array_like_inputs_are_read_in_batches() -> None:
    data = np.random.default_rng(0).normal(size=(10, *SAMPLE)).astype(np.float32)
    rows = RowsOnly(data)
    out = cache_features(Recorder(4), rows, batch_size=4, sample_shape=SAMPLE, output_shape=(4,))
    assert [len(r) for r in rows.requests] == [4, 4, 2], "never the whole dataset at once"
    np.testing.assert_allclose(out, cache_features(Recorder(4), data, batch_size=4, sample_shape=SAMPLE, output_shape=(4,)))


def test_flat_rows_are_reshaped_to_the_sample_shape() -> None:
    x = np.arange(3 * 6, dtype=np.float64).reshape(3, 6)  # stored flat, float64
    out = cache_features(Recorder(4), x, batch_size=4, sample_shape=SAMPLE, output_shape=(4,))
    np.testing.assert_allclose(out, x.astype(np.float32) @ Recorder(4).weight, rtol=1e-6)


def test_a_wrong_backbone_output_shape_is_an_error() -> None:
    with pytest.raises(RuntimeError, match="expected"):
        cache_features(Recorder(4), np.zeros((4, *SAMPLE)), batch_size=4, sample_shape=SAMPLE, output_shape=(5,))


def test_memory_refusal_names_the_figures() -> None:
    assert feature_bytes(1000, (16, 28, 28)) == 1000 * 16 * 28 * 28 * 4
    check_feature_memory(1000, (10,), available_bytes=10**9)
    with pytest.raises(BackendUnavailable, match="GiB.*freeze more layers"):
        check_feature_memory(60_000, (16, 28, 28), available_bytes=2 * 2**30)
