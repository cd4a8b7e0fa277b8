"""Every file TrainPilot reads, damaged in many ways: a one-line error naming the file, never a
traceback, never code run from data, never a half-made run left behind."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from faultkit import corpus, scratch
from trainpilot.run.checkpoint import load_checkpoint, save_checkpoint
from trainpilot.job.data import Dataset, load_dataset
from trainpilot.errors import CheckpointError, DatasetError, WorkloadError
from trainpilot.job.models import ModelSpec, build_model
from trainpilot.job.workload import profile_model
from trainpilot_tui.cli import main

FUZZ = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def fresh_dir() -> Path:
    """A new directory per hypothesis example (function-scoped fixtures are shared across examples)."""
    return scratch.fresh_dir("bad")


def assert_one_line_about(error: Exception, path: Path) -> None:
    text = str(error)
    assert "\n" not in text and text.strip() == text and len(text) < 400, text
    assert text.startswith(str(path)) and len(text) > len(str(path)) + 2, text  # the file, then the problem
    assert "Error:" not in text.split(": ", 1)[1][:30] or "(" in text, text  # no bare exception dump
    assert "DatasetError" not in text and "CheckpointError" not in text, text  # one wrapping, not two


def assert_sane(dataset: Dataset) -> None:
    """A dataset that loaded is one TrainPilot can train on."""
    X = np.asarray(dataset.X, dtype=np.float64)
    assert len(dataset) >= 2 and X.shape[0] == dataset.y.shape[0] == len(dataset)
    assert np.all(np.isfinite(X)) and np.all(np.abs(X) <= np.finfo(np.float32).max)
    assert dataset.y.dtype == np.int64 and dataset.y.min() >= 0 and dataset.y.max() < dataset.num_classes


def load_or_refuse(target: Path) -> Dataset | None:
    try:
        dataset = load_dataset(target)
    except DatasetError as exc:
        assert_one_line_about(exc, target)
        return None
    assert_sane(dataset)
    return dataset


# ---------------------------------------------------------------- datasets, byte-level damage


@FUZZ
@given(
    fmt=st.sampled_from(corpus.DATASET_FORMATS),
    kind=st.sampled_from(corpus.MUTATIONS),
    position=st.floats(0, 1, exclude_max=True),
    size=st.integers(1, 64),
    seed=st.integers(0, 2**31),
)
def test_damaged_dataset_files_are_refused_in_one_line_or_still_valid(fmt, kind, position, size, seed):
    target = corpus.write_dataset(fmt, fresh_dir(), lambda raw: corpus.mutate(raw, kind, position, size, seed))
    load_or_refuse(target)


@pytest.mark.parametrize("name, X, y", corpus.bad_array_cases(), ids=[c[0] for c in corpus.bad_array_cases()])
@pytest.mark.parametrize("container", ["npy", "npz"])
def test_wrong_content_is_refused_with_the_problem(tmp_path, name, X, y, container):
    target = corpus.write_arrays(tmp_path, X, y, container)
    with pytest.raises(DatasetError) as caught:
        load_dataset(target)
    assert_one_line_about(caught.value, target)


DTYPES = ["float16", "float32", "float64", "int8", "uint8", "int64", "uint64", "bool", "complex64", "<U3", "datetime64[s]", "V4"]


@FUZZ
@given(
    x_dtype=st.sampled_from(DTYPES),
    x_shape=st.lists(st.integers(0, 5), min_size=0, max_size=5),
    y_dtype=st.sampled_from(DTYPES),
    y_shape=st.lists(st.integers(0, 6), min_size=0, max_size=3),
    special=st.sampled_from([None, np.nan, np.inf, -np.inf, 1e39, -1.0, 0.5, 2**40]),
    seed=st.integers(0, 1000),
)
def test_arbitrary_arrays_load_only_when_trainable(x_dtype, x_shape, y_dtype, y_shape, special, seed):
    rng = np.random.default_rng(seed)
    X = np.asarray(rng.normal(size=x_shape) * 3).astype(x_dtype) if x_dtype[0] not in "<dV" else np.zeros(x_shape, x_dtype)
    y = np.asarray(rng.integers(0, 4, size=y_shape)).astype(y_dtype) if y_dtype[0] not in "<dV" else np.zeros(y_shape, y_dtype)
    if special is not None and y.size and y.dtype.kind in "fiu":
        with np.errstate(all="ignore"):
            value = np.asarray(special, dtype=np.float64)
            y.flat[rng.integers(0, y.size)] = value if y.dtype.kind == "f" else np.nan_to_num(value, posinf=2**40, neginf=-1).astype(y.dtype)
    if special is not None and X.size and X.dtype.kind == "f":
        with np.errstate(all="ignore"):
            X.flat[rng.integers(0, X.size)] = special
    directory = fresh_dir()
    np.save(directory / "X_train.npy", X)
    np.save(directory / "y_train.npy", y)
    load_or_refuse(directory)


@FUZZ
@given(
    shape=st.lists(st.integers(0, 2**40), min_size=0, max_size=4),
    dtype=st.sampled_from(["<f4", "<f8", "<i8", "|u1", "|O", "<c8", "|V8"]),
    body=st.binary(max_size=256),
    which=st.sampled_from(["X_train.npy", "y_train.npy"]),
)
def test_lying_npy_headers_never_allocate_or_crash(shape, dtype, body, which):
    directory = fresh_dir()
    X, y = corpus.valid_arrays()
    np.save(directory / "X_train.npy", X)
    np.save(directory / "y_train.npy", y)
    (directory / which).write_bytes(corpus.npy_with_header(tuple(shape), dtype, body))
    load_or_refuse(directory)


@FUZZ
@given(
    magic=st.sampled_from([b"\x00\x00", b"\x00\x01", b"\xff\xff"]),
    type_code=st.sampled_from([0x08, 0x09, 0x0B, 0x0C, 0x0D, 0x0E, 0x00, 0x10]),
    dims=st.lists(st.integers(0, 2**32 - 1), min_size=0, max_size=5),
    body=st.binary(max_size=300),
    gz=st.booleans(),
)
def test_idx_headers_of_any_kind(magic, type_code, dims, body, gz):
    import gzip
    import struct

    directory = fresh_dir()
    raw = magic + bytes([type_code, len(dims)]) + struct.pack(f">{len(dims)}I", *dims) + body
    labels = corpus.idx_bytes(np.arange(24) % 3)
    suffix = ".gz" if gz else ""
    (directory / f"train-images-idx3-ubyte{suffix}").write_bytes(gzip.compress(raw) if gz else raw)
    (directory / f"train-labels-idx1-ubyte{suffix}").write_bytes(gzip.compress(labels) if gz else labels)
    load_or_refuse(directory)


CELLS = ["1", "0", "2", "0.5", "-3.25", "1e3", "nan", "inf", "-inf", "1e400", "", " ", "abc", "1,5", '"7"', "0x10", "1_000", "\u00e9", "\x00"]


@FUZZ
@given(rows=st.lists(st.lists(st.sampled_from(CELLS), min_size=0, max_size=5), min_size=0, max_size=12), gz=st.booleans())
def test_ragged_and_odd_csv(rows, gz):
    import gzip

    text = "\n".join(",".join(row) for row in rows).encode("utf-8", errors="surrogatepass")
    target = fresh_dir() / ("data.csv.gz" if gz else "data.csv")
    target.write_bytes(gzip.compress(text) if gz else text)
    load_or_refuse(target)


def test_a_gzip_bomb_is_refused_before_it_is_inflated(tmp_path, monkeypatch):
    import trainpilot.job.data as data

    monkeypatch.setattr(data, "available_memory_bytes", lambda: 64 * 10**6)  # a small machine
    bomb = tmp_path / "train-images-idx3-ubyte.gz"
    with __import__("gzip").open(bomb, "wb") as handle:
        handle.write(corpus.idx_bytes(np.zeros((100_000, 28, 28), np.uint8)))  # 78 MB of zeros, ~80 kB on disk
    (tmp_path / "train-labels-idx1-ubyte").write_bytes(corpus.idx_bytes(np.zeros(100_000, np.uint8)))
    assert bomb.stat().st_size < 10**6
    with pytest.raises(DatasetError, match="too large to load") as caught:
        load_dataset(tmp_path)
    assert_one_line_about(caught.value, bomb)


# ---------------------------------------------------------------- nothing from data ever runs


def test_pickle_payloads_are_refused_and_never_run(tmp_path):
    marker = tmp_path / "EXECUTED"
    payloads = corpus.pickle_payloads(marker)
    npy_dir = tmp_path / "npy"
    npy_dir.mkdir()
    (npy_dir / "X_train.npy").write_bytes(payloads["X_train.npy"])
    np.save(npy_dir / "y_train.npy", np.zeros(24, np.int64))
    with pytest.raises(DatasetError, match="never unpickles"):
        load_dataset(npy_dir)
    (tmp_path / "data.npz").write_bytes(payloads["data.npz"])
    with pytest.raises(DatasetError) as caught:
        load_dataset(tmp_path / "data.npz")
    assert str(caught.value).endswith(": holds Python objects, which TrainPilot never unpickles")
    for name in ("latest.pt", "legacy.pt"):
        (tmp_path / name).write_bytes(payloads[name])
        with pytest.raises(CheckpointError, match="not a readable TrainPilot checkpoint"):
            load_checkpoint(tmp_path / name)
    assert not marker.exists()
    # The marker really would appear if the payload were unpickled: the test can fail.
    import pickle

    pickle.loads(payloads["legacy.pt"])
    assert marker.exists()


# ---------------------------------------------------------------- checkpoints


@pytest.fixture(scope="module")
def checkpoint_bytes(tmp_path_factory) -> tuple[bytes, dict]:
    from trainpilot.run.trainer import Trainer

    X, y = corpus.valid_arrays()
    data = Dataset(X[:, None], y, "t", 3)
    model = build_model("mlp", data.sample_shape, 3)
    trainer = Trainer(model, data, data, batch_size=8, lr=1e-3, seed=0)
    trainer.train_step(0, 0)
    state = dict(trainer.state_dict(), epoch=1, step=0, run_id="r", config={"model": "mlp", "dataset": "demo", "batch_size": 8, "lr": 1e-3, "seed": 0, "val_fraction": 0.1, "epochs": 2})
    directory = tmp_path_factory.mktemp("ckpt")
    path = save_checkpoint(directory, state)
    return path.read_bytes(), load_checkpoint(path)


@FUZZ
@given(kind=st.sampled_from(corpus.MUTATIONS), position=st.floats(0, 1, exclude_max=True), size=st.integers(1, 64), seed=st.integers(0, 2**31))
def test_damaged_checkpoints_are_refused_or_identical(checkpoint_bytes, kind, position, size, seed):
    raw, original = checkpoint_bytes
    path = fresh_dir() / "latest.pt"
    path.write_bytes(corpus.mutate(raw, kind, position, size, seed))
    try:
        state = load_checkpoint(path)
    except CheckpointError as exc:
        assert_one_line_about(exc, path)
        return
    # It loaded: then the damage hit nothing that matters (the digest matched) — same content.
    assert state["digest"] == original["digest"]
    for name, tensor in original["model_state"].items():
        assert torch.equal(state["model_state"][name], tensor)


# ---------------------------------------------------------------- user model files


@pytest.mark.parametrize("name", list(corpus.MODEL_FILES))
def test_broken_model_files_give_one_line(tmp_path, name):
    source, cls = corpus.MODEL_FILES[name]
    path = tmp_path / "net.py"
    path.write_bytes(source.encode("latin1"))
    with pytest.raises(WorkloadError) as caught:
        model = build_model(ModelSpec.from_config(f"{path}:{cls}"), (1, 4, 4), 3)
        profile_model(model, (1, 4, 4), 3, 24, name=f"{path}:{cls}")
    assert_one_line_about(caught.value, path)


# ---------------------------------------------------------------- the command, end to end


def _cli_cases(root: Path) -> list[tuple[str, list[str], Path]]:
    """(name, args, the file the error must name)."""
    cases = []
    for fmt in corpus.DATASET_FORMATS:
        target = corpus.write_dataset(fmt, root / fmt, lambda raw: corpus.mutate(raw, "truncate", 0.3, 1, 0))
        named = target if target.is_file() else target
        cases.append((f"truncated {fmt}", ["--dataset", str(target)], named))
    corpus.write_dataset("npy_x", root / "nan")
    X, y = corpus.valid_arrays()
    X[1, 1, 1] = np.nan
    np.save(root / "nan" / "X_train.npy", X)
    cases.append(("nan features", ["--dataset", str(root / "nan")], root / "nan"))
    model = root / "bad_model.py"
    model.write_text("raise ValueError('boom')\n")
    cases.append(("model file raises", ["--model", f"{model}:Net"], model))
    wrong_shape = root / "wrong_shape.py"
    wrong_shape.write_bytes(corpus.MODEL_FILES["forward raises"][0].encode())
    cases.append(("model forward fails", ["--model", f"{wrong_shape}:Net"], wrong_shape))
    exits = root / "exits.py"
    exits.write_text("import sys\nsys.exit(0)\n")
    cases.append(("model file exits 0", ["--model", f"{exits}:Net"], exits))
    return cases


def test_cli_bad_inputs_exit_1_with_one_line_and_leave_nothing(tmp_path, trainpilot_home, capsys):
    for name, args, named in _cli_cases(tmp_path):
        code = main(["headless", "run", "--epochs", "1", "--backend", "cpu", "--threads", "1", *args])
        out, err = capsys.readouterr()
        lines = [line for line in err.splitlines() if line.strip()]
        assert code == 1, (name, err)
        assert out == "", name
        assert "Traceback" not in err, (name, err)
        assert len(lines) == 1 and lines[0].startswith(f"error: {named}"), (name, err)
        runs = trainpilot_home / "runs"
        assert not runs.exists() or not any(runs.iterdir()), (name, list(runs.iterdir()))


@pytest.mark.parametrize("damage", ["bit flip", "pickle"])
def test_cli_resume_from_a_damaged_checkpoint_touches_nothing(trainpilot_home, checkpoint_bytes, capsys, tmp_path, damage):
    run = trainpilot_home / "runs" / "damaged"
    run.mkdir(parents=True)
    raw = bytearray(checkpoint_bytes[0])
    raw[len(raw) // 2] ^= 0xFF
    (run / "latest.pt").write_bytes(bytes(raw) if damage == "bit flip" else corpus.pickle_payloads(tmp_path / "EXECUTED")["legacy.pt"])
    before = {p.name: p.read_bytes() for p in run.iterdir()}
    code = main(["headless", "run", "--resume", "damaged", "-q"])
    err = capsys.readouterr().err
    assert code == 1 and "Traceback" not in err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith(f"error: {run / 'latest.pt'}"), err
    assert {p.name: p.read_bytes() for p in run.iterdir()} == before
    assert not (tmp_path / "EXECUTED").exists()


# ---------------------------------------------------------------- the user is told what runs


def test_help_says_a_model_file_is_code(capsys, monkeypatch):
    """A model file is the one input TrainPilot executes; --help must say so."""
    import re

    monkeypatch.setenv("COLUMNS", "200")
    assert main(["headless", "run", "--help"]) == 0
    text = " ".join(re.sub("[\u2500-\u257f]", " ", capsys.readouterr().out).split())  # without the box drawing
    assert "A model file is Python code and runs with your rights" in text
