"""Kill checkpoint writers at random moments and check what they leave behind.

    python ckpt_killer.py DIR KILLS SEED        prints one JSON line per kill

A parent process (this one) forks a writer that saves checkpoints into DIR in a loop with the real
`save_checkpoint`, sleeps a random time, SIGKILLs it, then loads DIR's latest checkpoint with the
real `load_checkpoint`. Every kill must leave a checkpoint that loads and is one complete version
(its tensor holds a single value equal to its `epoch`). Forking keeps each kill cheap: torch is
imported once. One in four kills is aimed inside a write: the writer stops half way through the
temporary file and the parent kills it there.
"""
from __future__ import annotations

import io
import json
import os
import random
import signal
import sys
import time
from pathlib import Path

import torch

torch.set_num_threads(1)  # no OpenMP pool in the parent: forked children stay safe

from trainpilot.run.checkpoint import LATEST, atomic_write_bytes, content_digest, load_checkpoint, save_checkpoint  # noqa: E402
from trainpilot.errors import CheckpointError  # noqa: E402

CONFIG = {"model": "mlp", "dataset": "demo", "batch_size": 8, "lr": 1e-3, "seed": 0, "val_fraction": 0.1, "epochs": 99}


def state(version: int) -> dict:
    weights = torch.full((512, 1024), float(version))  # 2 MB: a write takes long enough to be hit
    return {
        "model_state": {"w": weights},
        "optimizer_state": {"state": {}, "param_groups": []},
        "epoch": version, "step": 0, "run_id": "killed", "config": CONFIG,
    }


def writer_loop(directory: Path, first: int) -> None:
    version = first
    while True:
        save_checkpoint(directory, state(version))
        version += 1


def half_writer(directory: Path, version: int, ready: int) -> None:
    """Write half of a real checkpoint into the temporary file, say so, and wait to be killed."""
    payload = dict(state(version), format_version=2)
    payload["digest"] = content_digest(payload)
    buffer = io.BytesIO()
    torch.save(payload, buffer)
    data = buffer.getvalue()

    def write_half(handle) -> None:
        handle.write(data[: len(data) // 2])
        handle.flush()
        os.write(ready, b"x")
        time.sleep(60)

    atomic_write_bytes(directory / LATEST, write_half)


def check(directory: Path) -> dict:
    temporaries = len(list(directory.glob(".*.tmp")))
    try:
        loaded = load_checkpoint(directory)
    except CheckpointError as exc:
        return {"ok": False, "error": str(exc), "temporaries": temporaries}
    weights = loaded["model_state"]["w"]
    complete = bool((weights == float(loaded["epoch"])).all())
    return {"ok": complete, "version": loaded["epoch"], "recovered": "recovered_from" in loaded, "temporaries": temporaries}


def main(directory: Path, kills: int, seed: int) -> None:
    rng = random.Random(seed)
    directory.mkdir(parents=True, exist_ok=True)
    save_checkpoint(directory, state(0))
    version = 1
    for kill in range(kills):
        aimed = kill % 4 == 3
        read_end, write_end = os.pipe()
        pid = os.fork()
        if pid == 0:  # the writer
            os.close(read_end)
            try:
                half_writer(directory, version, write_end) if aimed else writer_loop(directory, version)
            finally:
                os._exit(0)
        os.close(write_end)
        if aimed:
            os.read(read_end, 1)  # the temporary file is half written
        else:
            time.sleep(rng.uniform(0.0, 0.12))
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        os.close(read_end)
        result = check(directory)
        result.update(kill=kill, aimed=aimed)
        print(json.dumps(result), flush=True)
        version = (result.get("version") or version) + 1000  # a fresh range: stale data cannot pass as new


if __name__ == "__main__":
    main(Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]))
