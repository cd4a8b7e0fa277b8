"""What launching N local ranks really costs, beyond their training: measured on real launches.

The loopback probe (`hetero.link.Link.startup_s`) times only "two processes form a group". A real
`--nproc` launch also pays for the elastic agent, an interpreter plus torch and TrainPilot per rank,
the job's preparation (its data, its model, the probe of its step), the speed probe and the
teardown: on a 2-core machine several times the loopback figure (measured:
docs/measurements.md#cited-in-the-code-ranks). The job's preparation is its own (a job file that
builds a large data set pays more), so a launch is recorded without it:

    recorded   = launch wall time - rank 0's training time - rank 0's preparation
    predicted  = median of the recent records + this job's preparation, as planning measured it

Until a launch has been recorded the base falls back to the loopback figure and says so. Every
successful launch records (the CLI's `--nproc` and `fit(..., nproc=N)` alike).

Stored beside the calibration, one small JSON file per TRAINPILOT_HOME, keyed by rank count: the
ranks are launched from this home, so its launches are the ones to learn from.
"""

from __future__ import annotations

import json
import os
import statistics
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from trainpilot.parallel.link import Link

KEEP = 8  # recent launches kept per rank count: enough for a median, short enough to follow changes
FILE = "launch-overhead.json"


@dataclass(frozen=True)
class LaunchOverhead:
    seconds: float
    source: str  # "median of N --nproc launches" | "loopback probe (no launch recorded yet)"
    prepare_s: float = 0.0  # the job's own preparation, included in `seconds`


def _path(home: str | Path | None) -> Path:
    from trainpilot import paths

    folder = Path(home).expanduser() / "calibration" if home is not None else paths.calibration_dir()
    return folder / FILE


def _load(path: Path) -> dict[str, list[float]]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}  # none yet, or damaged: learning starts again
    if not isinstance(data, dict):
        return {}
    return {
        k: [float(v) for v in vs if isinstance(v, (int, float)) and v >= 0]
        for k, vs in data.items()
        if isinstance(vs, list)
    }


def record_launch(nproc: int, overhead_s: float, home: str | Path | None = None) -> None:
    """Add one launch's overhead (seconds beyond training). Negative or non-finite figures (clock
    trouble) are not recorded; the file is replaced atomically so a reader never sees half of it."""
    if not (overhead_s >= 0 and overhead_s < float("inf")):
        return
    path = _path(home)
    data = _load(path)
    data[str(nproc)] = (data.get(str(nproc), []) + [round(float(overhead_s), 4)])[-KEEP:]
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.name}.{os.getpid()}.{time.monotonic_ns()}.tmp")
    tmp.write_text(json.dumps(data, indent=1), encoding="utf-8")
    os.replace(tmp, path)


def launch_base(launch_s: float, actual_s: float, prepare_s: float = 0.0) -> float:
    """What one launch cost beyond its training and its job's preparation (what is recorded)."""
    return launch_s - actual_s - prepare_s


def learning_launch(nproc: int, args: list[str], *, shutdown_timeout_s: float) -> Any:
    """`parallel.launch.launch_local`, timed: a successful launch notes its wall time in rank 0's
    result and records what it cost for the next prediction (the CLI's `--nproc` and `fit` alike)."""
    from trainpilot.parallel.launch import launch_local

    started = time.perf_counter()
    outcome = launch_local(nproc, args, shutdown_timeout_s=shutdown_timeout_s)
    if outcome.ok:
        learn_from_launch(nproc, time.perf_counter() - started, (outcome.leader.report or {}).get("result"))
    return outcome


def learn_from_launch(nproc: int, launch_s: float, result: Any, home: str | Path | None = None) -> None:
    """After a successful launch: note its wall time in the result's `distributed` block and record
    its base for the next prediction. A result without the figures (a failed rank) teaches nothing."""
    if not isinstance(result, dict) or not isinstance(result.get("distributed"), dict):
        return
    result["distributed"]["launch_s"] = launch_s
    actual, prepare = result.get("actual_s"), result.get("prepare_s", 0.0)
    if isinstance(actual, (int, float)) and isinstance(prepare, (int, float)):
        record_launch(nproc, launch_base(launch_s, float(actual), float(prepare)), home)


def launch_overhead(
    nproc: int, fallback_s: float, home: str | Path | None = None, *, prepare_s: float = 0.0
) -> LaunchOverhead:
    """The start-up a prediction for `nproc` local ranks should add: the median of the recorded
    launches, or `fallback_s` (the loopback probe's group start-up) before any was recorded, plus
    `prepare_s`, the job's own preparation (every rank prepares it, side by side)."""
    seen = _load(_path(home)).get(str(nproc), [])
    if not seen:
        base, source = fallback_s, "loopback probe (no launch recorded yet)"
    else:
        base, source = statistics.median(seen), f"median of {len(seen)} measured --nproc {nproc} launch(es)"
    if prepare_s > 0:
        source += f" + {prepare_s:.1f} s preparing the job"
    return LaunchOverhead(base + max(prepare_s, 0.0), source, max(prepare_s, 0.0))


def with_launch_startup(link: Link, nproc: int, home: str | Path | None = None, *, prepare_s: float = 0.0) -> Link:
    """`link` with its start-up replaced by what a real `--nproc` launch costs (see above)."""
    import dataclasses

    cost = launch_overhead(nproc, link.startup_s, home, prepare_s=prepare_s)
    return dataclasses.replace(
        link, startup_s=cost.seconds, source=f"{link.source}; start-up {cost.seconds:.1f} s: {cost.source}"
    )
