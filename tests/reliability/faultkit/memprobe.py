"""Train on a dataset in this process and report the peak anonymous memory (JSON on stdout).

    python memprobe.py DATASET_DIR

Anonymous memory (RssAnon in /proc/self/status) is what the process really holds; pages of a
memory-mapped file count as RssFile and the kernel can drop them at any time, so RssAnon is the
figure that shows whether a dataset was loaded or streamed. A thread samples it every 2 ms.
"""
from __future__ import annotations

import json
import sys
import threading
import time


def rss_anon() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("RssAnon:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no RssAnon in /proc/self/status")


def main(dataset: str) -> None:
    import torch  # noqa: F401  (imported before the baseline: its own memory is not the dataset's)

    from trainpilot.run.session import SessionConfig, TrainingSession

    peak = baseline = rss_anon()
    done = threading.Event()

    def sample() -> None:
        nonlocal peak
        while not done.is_set():
            peak = max(peak, rss_anon())
            time.sleep(0.002)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    config = SessionConfig(model={"name": "mlp", "width": 16}, dataset=dataset, epochs=1, batch_size=4096, backend="cpu", threads=1, record_history=False)
    session = TrainingSession(config)
    start = time.perf_counter()
    for _ in session.events():
        pass
    seconds = time.perf_counter() - start
    done.set()
    sampler.join()
    assert session.finished is not None
    print(json.dumps({"status": session.finished.status, "message": session.finished.message, "baseline": baseline, "peak": peak, "seconds": seconds}))


if __name__ == "__main__":
    main(sys.argv[1])
