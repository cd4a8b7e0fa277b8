"""Inject faults into real TrainPilot runs and print what survived.

    python benchmarks/faults.py                 # about 3-4 minutes on 2 cores
    python benchmarks/faults.py --quick         # fewer repetitions, under 2 minutes

Faults: SIGKILL mid-epoch then `--resume`, SIGINT / SIGTERM / a second SIGINT then `--resume`
(real `trainpilot` subprocesses), checkpoint writers SIGKILLed at random moments, device faults
(a test backend that fails mid-step, on a move, at synchronize, with NaNs), history writers in
parallel and killed mid-write. Bad inputs: generated malformed datasets (each format), checkpoints,
model files, pickles, hardware profiles and theme files, each fed to the real command (in this
process, stderr captured; a sample also as subprocesses) or to its loader.

A run "finished" when it completed with the weights an uninterrupted run reaches (exactly: the CPU
path is deterministic). "Records lost": epochs missing from a finished run, checkpoints a kill
left unreadable, history rows a writer reported stored but that are missing. "Tracebacks shown":
any "Traceback" on a user-facing stderr, or an exception that escaped the command.
"""
from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "reliability"))  # the fault doubles and corpus live in tests/

RUN_ARGS = ["--model", "mlp", "--epochs", "3", "--batch-size", "4", "--seed", "5", "--backend", "cpu", "--threads", "1"]


@dataclass
class Row:
    fault: str
    injected: int = 0
    finished: int = 0
    lost: int = 0
    tracebacks: int = 0
    note: str = ""


@dataclass
class BadInputs:
    tried: int = 0
    refused: int = 0  # exit 1 with one line naming the file
    accepted: int = 0  # the damage left a valid file: it trained (exit 0)
    wrong: list[str] = field(default_factory=list)  # anything else
    tracebacks: int = 0
    by_kind: dict[str, int] = field(default_factory=dict)


# ---------------------------------------------------------------- helpers


def reference_state(dataset: Path, home: Path):  # type: ignore[no-untyped-def]
    import torch

    from trainpilot.run.session import SessionConfig, TrainingSession

    os.environ["TRAINPILOT_HOME"] = str(home)
    threads = torch.get_num_threads()
    session = TrainingSession(SessionConfig(model="mlp", dataset=str(dataset), epochs=3, batch_size=4, seed=5, backend="cpu", threads=1, record_history=False))
    for _ in session.events():
        pass
    torch.set_num_threads(threads)
    import copy

    return copy.deepcopy(session.trainer.state_dict())


def same_weights(a: dict, b: dict) -> bool:
    import torch

    return a["model_state"].keys() == b["model_state"].keys() and all(torch.equal(a["model_state"][k], b["model_state"][k]) for k in b["model_state"])


def resume_and_check(run_id: str, home: Path, reference: dict, row: Row) -> None:
    from faultkit.procs import run_cli
    from trainpilot.run.checkpoint import load_checkpoint

    done = run_cli(["headless", "run", "--resume", run_id, "--backend", "cpu", "--threads", "1", "--json", "-q"], home)
    row.tracebacks += done.stderr.count("Traceback")
    if done.returncode != 0:
        row.note = f"resume exit {done.returncode}: {done.stderr.strip()[-200:]}"
        return
    epochs = [e["epoch"] for e in json.loads(done.stdout)["epochs"]]
    row.lost += 3 - len(set(epochs) & {1, 2, 3})
    if same_weights(load_checkpoint(home / "runs" / run_id), reference):
        row.finished += 1
    else:
        row.note = "resumed weights differ from the uninterrupted run"


# ---------------------------------------------------------------- process faults


def signal_faults(dataset: Path, home: Path, reference: dict, repeats: int) -> list[Row]:
    from faultkit.procs import RunningCli, is_step_of_epoch

    rows = []
    plans = [("SIGKILL mid-epoch, then --resume", [signal.SIGKILL], "train_orchestrated")] * repeats + [
        ("SIGINT mid-epoch, then --resume", [signal.SIGINT], "trainpilot_tui"),
        ("SIGTERM mid-epoch, then --resume", [signal.SIGTERM], "trainpilot_tui"),
        ("two SIGINTs (exit at once), then --resume", [signal.SIGINT, signal.SIGINT], "trainpilot_tui"),
    ]
    by_name: dict[str, Row] = {}
    for name, signals, module in plans:
        row = by_name.setdefault(name, Row(name))
        row.injected += 1
        args = (["headless", "run"] if module == "trainpilot_tui" else []) + [*RUN_ARGS, "--dataset", str(dataset), "--jsonl", "-q"]
        run = RunningCli(args, home, module=module)
        run.wait_for(lambda e: e.get("kind") == "CheckpointSaved")
        run.wait_for(is_step_of_epoch(2))
        for signum in signals:
            run.signal(signum)
            time.sleep(0.01)
        code = run.finish()
        row.tracebacks += run.stderr.count("Traceback")
        expected = {signal.SIGKILL: -9, signal.SIGINT: 130, signal.SIGTERM: 143}[signals[0]]
        if code != expected:
            row.note = f"exit {code}, expected {expected}"
            continue
        run_id = next(e["run_id"] for e in run.events if "run_id" in e)
        resume_and_check(run_id, home, reference, row)
    rows.extend(by_name.values())
    return rows


def checkpoint_kill_fault(kills: int) -> Row:
    row = Row("SIGKILL during checkpoint writes", injected=kills)
    with tempfile.TemporaryDirectory() as tmp:
        done = subprocess.run([sys.executable, str(REPO / "tests/reliability/faultkit/ckpt_killer.py"), tmp + "/run", str(kills), "11"], capture_output=True, text=True, timeout=600)
    results = [json.loads(line) for line in done.stdout.splitlines()]
    row.finished = sum(r["ok"] for r in results)  # each kill left one complete, loadable checkpoint
    row.lost = kills - row.finished
    row.tracebacks = done.stderr.count("Traceback")
    row.note = f"{sum(r['aimed'] for r in results)} aimed inside a write"
    return row


def device_faults() -> Row:
    import copy

    import torch

    from faultkit.doubles import FlakyBackend, install
    from trainpilot import events as ev
    from trainpilot.job.data import demo_dataset, validate
    from trainpilot.run.session import SessionConfig, TrainingSession

    full = demo_dataset(n=600)
    data = validate(full.X, full.y, "demo")
    threads = torch.get_num_threads()

    def run(backend: str, flaky=None, steer=None):  # type: ignore[no-untyped-def]
        undo = install(flaky) if flaky else (lambda: None)
        try:
            session = TrainingSession(SessionConfig(model="mlp", epochs=2, batch_size=32, seed=11, backend=backend, threads=1, record_history=False), dataset=data)
            for event in session.events():
                if steer:
                    steer(session, event)
            return session
        finally:
            undo()
            torch.set_num_threads(threads)

    reference = copy.deepcopy(run("cpu").trainer.state_dict())
    cases = [("step", 5), ("step", 26), ("nan", 20), ("sync", 1), ("move", 1), ("convert", 1)]
    row = Row("device fault mid-run -> CPU fallback", note="step x2, nan, sync, move, convert, move on override")
    for fault, at in cases + [("override-move", 1)]:
        row.injected += 1
        if fault == "override-move":
            def steer(session, event):  # type: ignore[no-untyped-def]
                if isinstance(event, ev.StepProgressed) and event.epoch == 2 and not getattr(session, "_asked", False):
                    session._asked = True
                    session.override_backend("cuda")
            session = run("cpu", FlakyBackend("move", 1), steer)
        else:
            session = run("cuda", FlakyBackend(fault, at))
        result = session.finished.result
        row.lost += 2 - len(result["epochs"])
        if result["status"] == "success" and result["fallback_reason"] and same_weights(copy.deepcopy(session.trainer.state_dict()), reference):
            row.finished += 1
    return row


def history_faults(home: Path, rounds: int) -> list[Row]:
    writer = REPO / "tests/reliability/faultkit/history_writer.py"
    env = dict(os.environ, TRAINPILOT_HOME=str(home))
    rows = []
    db = home / "bench-history.sqlite3"
    procs = [subprocess.Popen([sys.executable, str(writer), str(db), f"w{i}", "50"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env) for i in range(4)]
    errs = [p.communicate(timeout=300)[1] for p in procs]
    with sqlite3.connect(db) as conn:
        stored = {r[0] for r in conn.execute("SELECT run_id FROM runs")}
    row = Row("history: 4 writers x 50 records at once", injected=4, finished=sum(p.returncode == 0 for p in procs), lost=200 - len(stored))
    row.tracebacks = sum(e.count("Traceback") for e in errs)
    rows.append(row)

    killed = Row("history: writers SIGKILLed mid-write", note="rows reported stored must survive")
    db = home / "bench-killed.sqlite3"
    rng = random.Random(5)
    for round_ in range(rounds):
        procs = [subprocess.Popen([sys.executable, str(writer), str(db), f"r{round_}w{i}", "1000000"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env) for i in range(3)]
        time.sleep(rng.uniform(0.8, 1.5))
        for p in procs:
            p.send_signal(signal.SIGKILL)
        acknowledged = set()
        for p in procs:
            acknowledged |= set(p.communicate(timeout=60)[0].split())
        with sqlite3.connect(db) as conn:
            ok = conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
            stored = {r[0] for r in conn.execute("SELECT run_id FROM runs")}
        killed.injected += 3
        killed.finished += 3 if ok else 0  # "finished": the database opens intact afterwards
        killed.lost += len(acknowledged - stored)
    rows.append(killed)
    return rows


# ---------------------------------------------------------------- bad inputs


def cli_case(bad: BadInputs, kind: str, args: list[str], named: Path, home: Path) -> None:
    """Run the real command in this process on one bad input and classify what the user saw."""
    from trainpilot_tui.cli import main

    bad.tried += 1
    bad.by_kind[kind] = bad.by_kind.get(kind, 0) + 1
    out, err = io.StringIO(), io.StringIO()
    runs = home / "runs"
    before = set(runs.iterdir()) if runs.exists() else set()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(["headless", "run", "-q", "--epochs", "1", "--batch-size", "8", "--backend", "cpu", "--threads", "1", *args])
    except BaseException as exc:  # noqa: BLE001 - an escape is exactly what we count
        bad.tracebacks += 1
        bad.wrong.append(f"{kind}: {type(exc).__name__} escaped: {exc}")
        return
    text = err.getvalue()
    lines = [line for line in text.splitlines() if line.strip()]
    bad.tracebacks += text.count("Traceback")
    after = set(runs.iterdir()) if runs.exists() else set()
    if code == 0:
        bad.accepted += 1
    elif code == 1 and len(lines) == 1 and lines[0].startswith(f"error: {named}") and after == before and not out.getvalue():
        bad.refused += 1
    else:
        bad.wrong.append(f"{kind}: exit {code}, {len(lines)} stderr line(s): {text.strip()[:200]!r}, new run dirs {sorted(p.name for p in after - before)}")


def loader_case(bad: BadInputs, kind: str, load, path: Path) -> None:  # type: ignore[no-untyped-def]
    from trainpilot.errors import TrainPilotError

    bad.tried += 1
    bad.by_kind[kind] = bad.by_kind.get(kind, 0) + 1
    try:
        load(path)
        bad.accepted += 1
    except TrainPilotError as exc:
        if "\n" not in str(exc) and str(exc).startswith(str(path)):
            bad.refused += 1
        else:
            bad.wrong.append(f"{kind}: {exc!s:.200}")
    except Exception as exc:  # noqa: BLE001
        bad.tracebacks += 1
        bad.wrong.append(f"{kind}: {type(exc).__name__} escaped the loader: {exc!s:.160}")


def bad_inputs(cases: int, seed: int, home: Path, subprocess_sample: int) -> BadInputs:
    import gzip
    import struct

    import numpy as np

    from faultkit import corpus
    from trainpilot.run.checkpoint import save_checkpoint

    rng = random.Random(seed)
    root = Path(tempfile.mkdtemp(prefix="tp-bad-"))
    os.environ["TRAINPILOT_HOME"] = str(home)
    bad = BadInputs()
    counter = iter(range(10**9))

    def fresh() -> Path:
        path = root / f"c{next(counter)}"
        path.mkdir()
        return path

    # Fixed sets: wrong content in well-formed files, pickles, broken model files.
    for name, X, y in corpus.bad_array_cases():
        for container in ("npy", "npz"):
            target = corpus.write_arrays(fresh(), X, y, container)
            cli_case(bad, "wrong content", ["--dataset", str(target)], target, home)
    marker = root / "EXECUTED"
    payloads = corpus.pickle_payloads(marker)
    d = fresh()
    (d / "X_train.npy").write_bytes(payloads["X_train.npy"])
    np.save(d / "y_train.npy", np.zeros(24, np.int64))
    cli_case(bad, "pickle payload", ["--dataset", str(d)], d, home)
    d = fresh()
    (d / "data.npz").write_bytes(payloads["data.npz"])
    cli_case(bad, "pickle payload", ["--dataset", str(d / "data.npz")], d / "data.npz", home)
    for name in ("latest.pt", "legacy.pt"):
        run = home / "runs" / f"pickled-{name[:-3]}"
        run.mkdir(parents=True, exist_ok=True)
        (run / "latest.pt").write_bytes(payloads[name])
        cli_case(bad, "pickle payload", ["--resume", str(run)], run / "latest.pt", home)
    if marker.exists():
        bad.wrong.append("a pickle payload RAN")
    for name, (source, cls) in corpus.MODEL_FILES.items():
        d = fresh()
        (d / "net.py").write_bytes(source.encode("latin1"))
        cli_case(bad, "model file", ["--model", f"{d / 'net.py'}:{cls}"], d / "net.py", home)

    # A real checkpoint to damage.
    X, y = corpus.valid_arrays()
    ckpt_dir = fresh()
    from trainpilot.job.data import Dataset
    from trainpilot.run.trainer import Trainer
    from trainpilot.job.models import build_model

    data_dir = corpus.write_dataset("npy_x", fresh())
    ds = Dataset(X[:, None], y, str(data_dir), 3)
    trainer = Trainer(build_model("mlp", ds.sample_shape, 3), ds, ds, batch_size=8, lr=1e-3, seed=0)
    state = dict(trainer.state_dict(), epoch=0, step=1, run_id="x", config={"model": "mlp", "dataset": str(data_dir), "batch_size": 8, "lr": 1e-3, "seed": 0, "val_fraction": 0.1, "epochs": 1})
    checkpoint = save_checkpoint(ckpt_dir, state).read_bytes()

    profiles = sorted((REPO / "profiles").glob("*.toml"))
    themes = sorted((REPO / "themes").glob("*.toml"))
    from trainpilot.machine.target_profiles import load_target

    try:
        from trainpilot_tui.app.themes import load_theme_file
    except Exception:  # noqa: BLE001 - the app is optional for this count
        load_theme_file = None

    # Generated cases until `cases` are reached.
    kinds = ["dataset bytes"] * 5 + ["npy header"] * 2 + ["idx header", "csv rows", "checkpoint bytes", "checkpoint bytes", "profile", "theme"]
    while bad.tried < cases:
        kind = rng.choice(kinds)
        mutation = corpus.random_mutation(rng)
        if kind == "dataset bytes":
            fmt = rng.choice(corpus.DATASET_FORMATS)
            target = corpus.write_dataset(fmt, fresh(), lambda raw: corpus.mutate(raw, *mutation))
            cli_case(bad, f"dataset bytes ({fmt})", ["--dataset", str(target)], target, home)
        elif kind == "npy header":
            d = corpus.write_dataset("npy_x", fresh())
            shape = tuple(rng.choice([0, 1, 3, 24, 2**20, 2**40]) for _ in range(rng.randrange(0, 4)))
            dtype = rng.choice(["<f4", "<f8", "<i8", "|u1", "|O", "<c8", "|V8", ">f4"])
            (d / rng.choice(["X_train.npy", "y_train.npy"])).write_bytes(corpus.npy_with_header(shape, dtype, rng.randbytes(rng.randrange(0, 400))))
            cli_case(bad, "npy header", ["--dataset", str(d)], d, home)
        elif kind == "idx header":
            d = fresh()
            dims = [rng.choice([0, 1, 4, 24, 2**31]) for _ in range(rng.randrange(0, 5))]
            raw = rng.choice([b"\x00\x00", b"\x01\x00"]) + bytes([rng.choice([8, 9, 11, 12, 13, 14, 0, 16]), len(dims)]) + struct.pack(f">{len(dims)}I", *dims) + rng.randbytes(rng.randrange(0, 500))
            gz = rng.random() < 0.5
            (d / ("train-images-idx3-ubyte" + (".gz" if gz else ""))).write_bytes(gzip.compress(raw) if gz else raw)
            (d / "train-labels-idx1-ubyte").write_bytes(corpus.idx_bytes(np.arange(24) % 3))
            cli_case(bad, "idx header", ["--dataset", str(d)], d, home)
        elif kind == "csv rows":
            cells = ["1", "0", "2", "0.5", "-3", "nan", "inf", "1e400", "", "abc", '"7"', "1_0"]
            rows = [[rng.choice(cells) for _ in range(rng.randrange(0, 6))] for _ in range(rng.randrange(0, 14))]
            target = fresh() / "data.csv"
            target.write_text("\n".join(",".join(r) for r in rows))
            cli_case(bad, "csv rows", ["--dataset", str(target)], target, home)
        elif kind == "checkpoint bytes":
            run = home / "runs" / f"damaged-{bad.tried}"
            run.mkdir(parents=True)
            (run / "latest.pt").write_bytes(corpus.mutate(checkpoint, *mutation))
            cli_case(bad, "checkpoint bytes", ["--resume", run.name], run / "latest.pt", home)
        elif kind == "profile" and profiles:
            target = fresh() / "profile.toml"
            target.write_bytes(corpus.mutate(rng.choice(profiles).read_bytes(), *mutation))
            loader_case(bad, "hardware profile (loader)", load_target, target)
        elif kind == "theme" and themes and load_theme_file is not None:
            target = fresh() / "theme.toml"
            target.write_bytes(corpus.mutate(rng.choice(themes).read_bytes(), *mutation))
            loader_case(bad, "theme file (loader)", load_theme_file, target)

    # The same kind of inputs through real subprocesses: what a user's terminal shows.
    from faultkit.procs import run_cli

    for i in range(subprocess_sample):
        fmt = corpus.DATASET_FORMATS[i % len(corpus.DATASET_FORMATS)]
        target = corpus.write_dataset(fmt, fresh(), lambda raw: corpus.mutate(raw, "truncate", 0.4, 1, i))
        done = run_cli(["headless", "run", "-q", "--epochs", "1", "--dataset", str(target)], home)
        bad.tried += 1
        bad.by_kind["subprocess"] = bad.by_kind.get("subprocess", 0) + 1
        bad.tracebacks += done.stderr.count("Traceback")
        lines = [line for line in done.stderr.splitlines() if line.strip()]
        if done.returncode == 1 and len(lines) == 1 and lines[0].startswith("error: "):
            bad.refused += 1
        elif done.returncode == 0:
            bad.accepted += 1
        else:
            bad.wrong.append(f"subprocess {fmt}: exit {done.returncode}: {done.stderr.strip()[:200]!r}")
    return bad


# ---------------------------------------------------------------- report


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repetitions (CI-sized)")
    parser.add_argument("--cases", type=int, default=None, help="generated bad inputs (default 240, quick 210)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    cases = args.cases or (210 if args.quick else 240)
    start = time.perf_counter()
    home = Path(tempfile.mkdtemp(prefix="tp-faults-"))
    os.environ["TRAINPILOT_HOME"] = str(home)

    from trainpilot.job.data import write_demo_dataset

    dataset = write_demo_dataset(home / "data", n=1200, seed=3)
    reference = reference_state(dataset, home / "reference")
    os.environ["TRAINPILOT_HOME"] = str(home)

    rows: list[Row] = []
    rows += signal_faults(dataset, home, reference, repeats=1 if args.quick else 2)
    rows.append(checkpoint_kill_fault(24 if args.quick else 60))
    rows.append(device_faults())
    rows += history_faults(home, rounds=1 if args.quick else 3)
    bad = bad_inputs(cases, args.seed, home / "bad-home", subprocess_sample=4 if args.quick else 9)

    width = max(len(r.fault) for r in rows) + 2
    print(f"{'fault':<{width}}{'injected':>9}{'finished':>10}{'lost':>6}{'tracebacks':>12}  note")
    for r in rows:
        print(f"{r.fault:<{width}}{r.injected:>9}{r.finished:>10}{r.lost:>6}{r.tracebacks:>12}  {r.note}")
    print()
    kinds = ", ".join(f"{k} {v}" for k, v in sorted(bad.by_kind.items()))
    print(f"bad inputs: {bad.tried} tried ({kinds})")
    print(f"  refused with one line naming the file (exit 1, nothing left behind): {bad.refused}")
    print(f"  accepted because the damage left a valid file (trained, exit 0):     {bad.accepted}")
    print(f"  anything else: {len(bad.wrong)}")
    for line in bad.wrong[:20]:
        print(f"    {line}")
    print()
    injected = sum(r.injected for r in rows)
    finished = sum(r.finished for r in rows)
    lost = sum(r.lost for r in rows)
    tracebacks = sum(r.tracebacks for r in rows) + bad.tracebacks
    print(f"{'faults injected':<34}{injected}")
    print(f"{'runs that finished':<34}{finished} of {injected}")
    print(f"{'records lost':<34}{lost}  (target 0)")
    print(f"{'bad inputs tried':<34}{bad.tried}  (target >= 200)")
    print(f"{'tracebacks shown to the user':<34}{tracebacks}  (target 0)")
    print(f"({time.perf_counter() - start:.0f} s)")
    ok = lost == 0 and tracebacks == 0 and finished == injected and bad.tried >= 200 and not bad.wrong
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
