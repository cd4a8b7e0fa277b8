"""The wire between ranks: bandwidth, latency, and what a ring all-reduce of the gradients costs.

Ring all-reduce (reduce-scatter then all-gather, what gloo and NCCL use for large tensors) sends
each byte 2(n-1)/n times over the slowest link and pays the link latency in each of its 2(n-1)
phases:

    t(n, bytes) = 2(n-1)/n * bytes / bandwidth + 2(n-1) * latency        (0 for one rank)

On one machine the wire is loopback through gloo: its figures are measured, not assumed (see
`loopback_probe.py`): two real processes all-reduce a few sizes, the times are fitted to the
formula above, and the result is cached per machine with the calibration. A cluster file states
its link instead (`cluster.py`).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

PROBE_TIMEOUT_S = 120.0  # two processes importing torch on a loaded 2-core machine can take long (docs/measurements.md)
CACHE_VERSION = 1


@dataclass(frozen=True)
class Link:
    bandwidth_bytes_per_s: float
    latency_s: float
    source: str  # where the figures come from: "measured: ..." or "cluster file ..."
    startup_s: float = 0.0  # starting the ranks and forming the group, once per run (measured on loopback)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def ring_allreduce_s(nbytes: float, ranks: int, link: Link) -> float:
    """Seconds one all-reduce of `nbytes` takes on a ring of `ranks` over `link`."""
    if ranks < 1:
        raise ValueError(f"ranks must be at least 1, got {ranks}")
    if ranks == 1:
        return 0.0
    return 2.0 * (ranks - 1) / ranks * float(nbytes) / link.bandwidth_bytes_per_s + 2.0 * (ranks - 1) * link.latency_s


def fit_link(samples: list[tuple[float, float]], ranks: int) -> tuple[float, float]:
    """(bandwidth, latency) from (bytes, seconds) all-reduce timings on `ranks` ranks: least squares
    of t = a + b*bytes, then a = 2(n-1)*latency and b = 2(n-1)/n / bandwidth."""
    n = len(samples)
    if n < 2:
        raise ValueError("need timings of at least two sizes")
    mx = sum(x for x, _ in samples) / n
    my = sum(y for _, y in samples) / n
    sxx = sum((x - mx) ** 2 for x, _ in samples)
    slope = sum((x - mx) * (y - my) for x, y in samples) / sxx if sxx > 0 else 0.0
    intercept = my - slope * mx
    slope = max(slope, 1e-15)  # a flat fit (tiny sizes only) would mean infinite bandwidth
    intercept = max(intercept, 0.0)
    bandwidth = 2.0 * (ranks - 1) / ranks / slope
    latency = intercept / (2.0 * (ranks - 1))
    return bandwidth, latency


def _cache_path(home: str | Path | None, machine_id: str) -> Path:
    from trainpilot import paths

    folder = Path(home).expanduser() / "calibration" if home is not None else paths.calibration_dir()
    return folder / f"loopback-{machine_id}.json"


def loopback_link(home: str | Path | None = None, *, refresh: bool = False, machine_id: str | None = None) -> Link:
    """This machine's loopback as gloo sees it, measured once (seconds: docs/measurements.md) and then
    read from the cache.
    Raises RuntimeError when the probe cannot run (no gloo, no loopback)."""
    if machine_id is None:
        from trainpilot.backends import probe

        machine_id = probe(include_backends=False).machine_id
    path = _cache_path(home, machine_id)
    cached = None if refresh else cached_loopback(home, machine_id=machine_id)
    if cached is not None:
        return cached
    link = measure_loopback()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    tmp.write_text(
        json.dumps({"version": CACHE_VERSION, "measured_at": time.time(), "link": link.to_dict()}, indent=1),
        encoding="utf-8",
    )
    os.replace(tmp, path)
    return link


def cached_loopback(home: str | Path | None = None, *, machine_id: str) -> Link | None:
    """The loopback link measured here before, or None (never measured, or a damaged cache, which
    `loopback_link` measures again). A rank reads only this: measuring inside a launch would keep
    its peers waiting on it within their group's timeout."""
    path = _cache_path(home, machine_id)
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        if data.get("version") == CACHE_VERSION:
            return Link(**data["link"])
    except (OSError, ValueError, KeyError, TypeError):
        pass
    return None


def measure_loopback(sizes: tuple[int, ...] = (1 << 10, 1 << 18, 1 << 21, 1 << 22), repeats: int = 5) -> Link:
    """Start two gloo ranks on 127.0.0.1 (`loopback_probe.py`), time all-reduces of `sizes` bytes,
    fit the ring formula. `startup_s` is the wall time from starting the processes to the group
    being formed, which a multi-process run pays once."""
    import socket

    with socket.socket() as s:  # a free port for the rendezvous
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = dict(
        os.environ,
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT=str(port),
        WORLD_SIZE="2",
        GLOO_SOCKET_IFNAME=_loopback_ifname(),
        OMP_NUM_THREADS="1",
    )
    args = [sys.executable, "-m", "trainpilot.parallel.loopback_probe", ",".join(map(str, sizes)), str(repeats)]
    started_at = time.time()
    procs = [
        subprocess.Popen(args, env=dict(env, RANK=str(r)), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for r in range(2)
    ]
    outputs = []
    try:
        for p in procs:
            out, err = p.communicate(timeout=PROBE_TIMEOUT_S)
            if p.returncode != 0:
                last = (err.strip().splitlines() or ["no output"])[-1]
                raise RuntimeError(f"loopback all-reduce probe failed: {last}")
            outputs.append(out)
    except subprocess.TimeoutExpired:
        raise RuntimeError(f"loopback all-reduce probe did not finish in {PROBE_TIMEOUT_S:.0f} s") from None
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    report = json.loads(outputs[0].strip().splitlines()[-1])
    bandwidth, latency = fit_link([(float(b), float(t)) for b, t in report["timings"]], 2)
    startup = float(report["ready_at"]) - started_at
    return Link(
        bandwidth,
        latency,
        f"measured: gloo all-reduce between 2 processes on loopback, {len(sizes)} sizes up to {max(sizes) >> 20} MiB",
        startup_s=max(startup, 0.0),
    )


def _loopback_ifname() -> str:
    """The loopback interface's name ("lo" on Linux, "lo0" on macOS), so gloo does not pick a
    network interface that the hostname happens to resolve to."""
    import socket

    try:
        names = {name for _i, name in socket.if_nameindex()}
    except OSError:
        names = set()
    return "lo0" if "lo0" in names and "lo" not in names else "lo"
