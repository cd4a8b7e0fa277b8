"""Add run records to a history database as fast as possible; print each run id once it is stored.

    python history_writer.py DB TAG COUNT

A record the writer printed has been committed (History.add returned): after any kill it must
still be in the database.
"""
from __future__ import annotations

import sys
import time

from trainpilot.plans import Plan
from trainpilot.predict.history import History, RunRecord


def main(path: str, tag: str, count: int) -> None:
    history = History(path)
    for i in range(count):
        history.add(RunRecord(
            run_id=f"{tag}-{i}", recorded_at=time.time(), machine_id="writer-test", footprint="mlp|p1",
            profile={"model": "mlp", "params": 1, "dataset_size": 10, "batch_size": 2}, plan=Plan("cpu", threads=1),
            busy_cores=0.0, cpu_percent=0.0, predicted_s=1.0, actual_s=1.0, status="success", epochs=1, epochs_done=1,
        ))
        print(f"{tag}-{i}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]))
