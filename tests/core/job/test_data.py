"""Every dataset format loads into the same validated shape; bad files are one-line errors."""
from __future__ import annotations

import gzip
import struct

import numpy as np
import pytest

from trainpilot.job.data import demo_dataset, load_dataset, resolve_dataset, write_demo_dataset
from trainpilot.errors import DatasetError


def _idx(array: np.ndarray) -> bytes:
    return struct.pack(">BBBB", 0, 0, 0x08, array.ndim) + struct.pack(f">{array.ndim}I", *array.shape) + array.astype(np.uint8).tobytes()


def test_demo_dataset_is_deterministic_and_balanced():
    a, b = demo_dataset(), demo_dataset()
    assert np.array_equal(a.X, b.X) and np.array_equal(a.y, b.y)
    assert a.X.shape == (2400, 1, 28, 28) and a.num_classes == 10
    assert np.bincount(a.y).min() == 240


def test_npy_directory_round_trip_is_memory_mapped(tmp_path):
    write_demo_dataset(tmp_path, n=100)
    data = load_dataset(tmp_path)
    assert isinstance(data.X, np.memmap)
    assert data.sample_shape == (1, 28, 28) and len(data) == 100
    train, val = data.split(0.2, seed=1)
    assert len(train) == 80 and len(val) == 20
    assert train.X[[0, 3]].shape == (2, 1, 28, 28)


def test_x_y_npy_names_and_npz(tmp_path):
    X, y = np.random.rand(30, 4).astype(np.float32), np.arange(30) % 3
    (tmp_path / "d").mkdir()
    np.save(tmp_path / "d" / "X.npy", X)
    np.save(tmp_path / "d" / "y.npy", y)
    assert load_dataset(tmp_path / "d").num_classes == 3
    np.savez(tmp_path / "a.npz", X_train=X, y_train=y)
    loaded = load_dataset(tmp_path / "a.npz")
    assert np.allclose(loaded.X, X) and loaded.sample_shape == (4,)


@pytest.mark.parametrize("gz", [False, True])
def test_idx_directory(tmp_path, gz):
    images = (np.arange(5 * 28 * 28) % 255).reshape(5, 28, 28)
    labels = np.array([0, 1, 2, 1, 0])
    suffix = ".gz" if gz else ""
    wrap = gzip.compress if gz else (lambda b: b)
    (tmp_path / f"train-images-idx3-ubyte{suffix}").write_bytes(wrap(_idx(images)))
    (tmp_path / f"train-labels-idx1-ubyte{suffix}").write_bytes(wrap(_idx(labels)))
    data = load_dataset(tmp_path)
    assert data.X.shape == (5, 1, 28, 28) and list(data.y) == [0, 1, 2, 1, 0]


def test_csv_with_header(tmp_path):
    path = tmp_path / "iris.csv"
    path.write_text("a,b,label\n1.0,2.0,0\n3,4,1\n5,6,1\n")
    data = load_dataset(path)
    assert data.X.shape == (3, 2) and list(data.y) == [0, 1, 1]


@pytest.mark.parametrize(
    "content, problem",
    [
        ("a,b\n", "no data rows"),
        ("1,2,0\n1,2\n", "data row 2 has 2 columns"),
        ("1,x,0\n2,3,1\n", None),  # a non-numeric first row reads as a header: then only one row
        ("1,2,0.5\n3,4,1\n", "whole numbers"),
        ("1,2,-1\n3,4,1\n", ">= 0"),
    ],
)
def test_bad_csv_is_a_one_line_error(tmp_path, content, problem):
    path = tmp_path / "bad.csv"
    path.write_text(content)
    with pytest.raises(DatasetError) as info:
        load_dataset(path)
    message = str(info.value)
    assert str(path) in message and "\n" not in message
    if problem:
        assert problem in message


def test_object_arrays_are_never_unpickled(tmp_path):
    np.save(tmp_path / "X_train.npy", np.array([{"a": 1}, {"b": 2}], dtype=object), allow_pickle=True)
    np.save(tmp_path / "y_train.npy", np.array([0, 1]))
    with pytest.raises(DatasetError, match="never unpickles"):
        load_dataset(tmp_path)


def test_mismatched_lengths_and_nan(tmp_path):
    np.savez(tmp_path / "a.npz", X=np.zeros((4, 3)), y=np.zeros(5))
    with pytest.raises(DatasetError, match="4 samples but 5 labels"):
        load_dataset(tmp_path / "a.npz")
    X = np.zeros((4, 3))
    X[1, 1] = np.nan
    np.savez(tmp_path / "b.npz", X=X, y=np.zeros(4))
    with pytest.raises(DatasetError, match="NaN"):
        load_dataset(tmp_path / "b.npz")


def test_missing_path_and_unknown_format(tmp_path):
    with pytest.raises(DatasetError, match="no such file"):
        load_dataset(tmp_path / "nope")
    (tmp_path / "x.parquet").write_bytes(b"PAR1")
    with pytest.raises(DatasetError, match="unknown dataset format"):
        load_dataset(tmp_path / "x.parquet")
    with pytest.raises(DatasetError, match="found no dataset here"):
        load_dataset(tmp_path)


def test_resolve_demo():
    assert resolve_dataset(None).source == "demo" and resolve_dataset("demo").num_classes == 10
