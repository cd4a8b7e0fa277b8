"""N ranks on this machine through torch's elastic launcher: the agent `torchrun` itself runs.

Why the launcher and not `torch.multiprocessing.spawn` with a hand-made store: the children get
exactly the environment torchrun gives across machines (RANK, WORLD_SIZE, LOCAL_RANK, the agent's
store), so `--nproc` and `torchrun --nnodes` run one code path; the agent binds its rendezvous on
port 0 and hands that store to the ranks (no port picked in advance, so parallel runs never
collide); and when a rank dies it stops the others and reports each rank's exit code and signal,
which is what turns a dead rank into an error instead of a hang.

Each rank writes a small report (status, message, and rank 0's result) into a directory given in
TRAINPILOT_RANK_REPORTS, so the launching command prints one result and one error line.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import sys
import tempfile
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPORTS_ENV = "TRAINPILOT_RANK_REPORTS"


@dataclass(frozen=True)
class RankOutcome:
    rank: int
    exitcode: int | None  # None: exited 0 (the launcher does not list ranks that succeeded)
    report: dict[str, Any] | None  # what the rank wrote before it ended (None: it died first)

    @property
    def how_it_ended(self) -> str:
        if self.exitcode is None or self.exitcode == 0:
            return "finished"
        if self.exitcode < 0:
            try:
                return f"was killed by {signal.Signals(-self.exitcode).name}"
            except ValueError:
                return f"was killed by signal {-self.exitcode}"
        return f"exited with code {self.exitcode}"


@dataclass(frozen=True)
class LaunchOutcome:
    ranks: tuple[RankOutcome, ...]

    @property
    def leader(self) -> RankOutcome:
        return self.ranks[0]

    @property
    def ok(self) -> bool:
        return (
            all(r.exitcode in (None, 0) for r in self.ranks) and (self.leader.report or {}).get("status") == "success"
        )

    def failure_message(self) -> str:
        """One line: rank 0's own reason when it has one (it names the lost peer and the checkpoint),
        else the first rank that failed, with how it ended."""
        lead = self.leader.report or {}
        if lead.get("status") not in (None, "success") and lead.get("message"):
            return str(lead["message"])
        for r in self.ranks:
            rep = r.report or {}
            if rep.get("status") not in (None, "success") and rep.get("message"):
                return f"rank {r.rank}: {rep['message']}"
        dead = [r for r in self.ranks if r.exitcode not in (None, 0)]
        if dead:
            return "; ".join(
                f"rank {r.rank} {r.how_it_ended}" + ("" if r.report else " before reporting") for r in dead
            )
        return "the ranks ended without a result"


def write_report(rank: int, report: dict[str, Any]) -> None:
    """Called in a rank: leave its report where the launching command looks (atomic rename)."""
    directory = os.environ.get(REPORTS_ENV)
    if not directory:
        return
    path = Path(directory) / f"rank-{rank}.json"
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(report, default=str))
    os.replace(tmp, path)


def launched_by_trainpilot() -> bool:
    return bool(os.environ.get(REPORTS_ENV))


def launch_local(
    nproc: int,
    args: list[str],
    *,
    shutdown_timeout_s: float = 30.0,
    entrypoint: str | None = None,
    env: dict[str, str] | None = None,
) -> LaunchOutcome:
    """Run `python <args>` as `nproc` ranks of one group on this machine and wait for all of them.

    `shutdown_timeout_s`: how long the agent lets the surviving ranks finish after one failed (rank
    0 checkpoints then) before it kills them. `env`: variables the ranks start with besides this
    process's own (launch_forecast.py's load)."""
    from torch.distributed.elastic.multiprocessing import DefaultLogsSpecs
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.launcher.api import LaunchConfig, elastic_launch

    quiet = logging.getLogger("torch.distributed.elastic")
    level = quiet.level
    quiet.setLevel(logging.CRITICAL + 1)  # the agent's own log lines; the command prints one summary
    failures: dict[int, int] = {}
    with tempfile.TemporaryDirectory(prefix="trainpilot-ranks-") as reports:
        # The agent's own log folder goes inside ours: by default it makes /tmp/torchelastic_<id>
        # on every launch and leaves it there.
        logs = DefaultLogsSpecs(log_dir=str(Path(reports) / "agent"))
        config = LaunchConfig(
            min_nodes=1,
            max_nodes=1,
            nproc_per_node=nproc,
            run_id=uuid.uuid4().hex,
            rdzv_backend="c10d",
            rdzv_endpoint="127.0.0.1:0",  # port 0: the agent binds a free port and shares the store
            max_restarts=0,  # a failed rank ends the run (resume with --resume), never a silent retry
            monitor_interval=0.1,
            start_method="spawn",
            logs_specs=logs,
            shutdown_timeout=int(max(1, round(shutdown_timeout_s))),
        )
        # the spawned ranks inherit this process's environment: set for the launch, then put back
        given = {**(env or {}), REPORTS_ENV: reports}
        previous = {name: os.environ.get(name) for name in given}
        os.environ.update(given)
        try:
            elastic_launch(config, entrypoint or sys.executable)(*args)
        except ChildFailedError as exc:
            failures = {int(rank): int(f.exitcode) for rank, f in exc.failures.items()}
        finally:
            quiet.setLevel(level)
            for name, value in previous.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value
        outcomes = tuple(RankOutcome(r, failures.get(r), _read(Path(reports) / f"rank-{r}.json")) for r in range(nproc))
    return LaunchOutcome(outcomes)


def _read(path: Path) -> dict[str, Any] | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None
