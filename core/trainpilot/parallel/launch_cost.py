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
successful launch records (the CLI's `--nproc` and `fit(..., nproc=N)` alike), and before it starts
the ranks, readies what rank 0 needs to predict it (`ready_to_predict`, launch_forecast.py).

Stored beside the calibration, one small JSON file per TRAINPILOT_HOME, keyed by rank count: the
ranks are launched from this home, so its launches are the ones to learn from.
"""

from __future__ import annotations

import json
import os
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trainpilot.units import seconds as fmt_s

if TYPE_CHECKING:
    from trainpilot.parallel.link import Link

LOAD_ENV = "TRAINPILOT_LAUNCH_BUSY_CORES"  # the machine's busy cores the launching process saw
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


def learning_launch(
    nproc: int, args: list[str], *, shutdown_timeout_s: float, say: Callable[[str], None] | None = None
) -> Any:
    """`parallel.launch.launch_local`, timed: a successful launch notes its wall time in rank 0's
    result and records what it cost for the next prediction (the CLI's `--nproc` and `fit` alike).
    First what rank 0 needs to predict the launch is readied (`ready_to_predict`; `say` tells a
    first calibration), outside the time the launch is learnt by."""
    from trainpilot.parallel.launch import launch_local

    env = ready_to_predict(say)
    started = time.perf_counter()
    outcome = launch_local(nproc, args, shutdown_timeout_s=shutdown_timeout_s, env=env)
    if outcome.ok:
        learn_from_launch(nproc, time.perf_counter() - started, (outcome.leader.report or {}).get("result"))
    return outcome


def ready_to_predict(say: Callable[[str], None] | None = None) -> dict[str, str]:
    """In the launching process, before the ranks start: calibrate a machine seen for the first time
    and measure its loopback once (both only where first-sight calibration is on, as for a single
    process's first run), then observe the load. Returns the variables the ranks are started with."""
    from trainpilot.backends import probe
    from trainpilot.machine.monitor import measure_load
    from trainpilot.predict import CostModel
    from trainpilot.predict.auto import auto_calibration_enabled, ensure_calibrated

    tell = say or (lambda _line: None)
    hardware = probe()
    if auto_calibration_enabled():
        try:
            cost = CostModel.open(hardware=hardware)
            if not cost.is_calibrated:
                tell("first run on this machine: a quick calibration of the cost model, to predict the launch")
                started = time.perf_counter()
                ensure_calibrated(cost)
                tell(f"calibrated in {fmt_s(time.perf_counter() - started)}")
            _measure_loopback_once(hardware.machine_id, tell)
        except Exception as exc:  # noqa: BLE001 - predicting is an optimisation: the launch goes on
            tell(f"cannot ready the launch's prediction ({type(exc).__name__}: {exc}); the ranks train unpredicted")
    return {LOAD_ENV: f"{measure_load(0.3).busy_cores:.3f}"}


def _measure_loopback_once(machine_id: str, tell: Callable[[str], None]) -> None:
    from trainpilot.parallel.link import cached_loopback, loopback_link

    if cached_loopback(machine_id=machine_id) is None:
        tell("measuring the loopback link the ranks all-reduce over (once on this machine)")
        loopback_link(machine_id=machine_id)


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
