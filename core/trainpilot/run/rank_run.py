"""One process of a distributed run, from Python: what `trainpilot.fit(..., nproc=N)` starts in each
rank, and what `fit` does itself in a process torchrun started (RANK and WORLD_SIZE set).

The CLI's ranks (trainpilot_tui/cli/distributed_run.py) add their progress lines and signal
handling around the same pieces: the rank pinned to its core slice, the group opened, a watchdog
that ends a rank stuck outside any collective, the session run, and the rank's report left where
the launching process reads it (parallel/launch.py).

    python -m trainpilot.run.rank_run CONFIG_JSON SHARES TIMEOUT_S     # a rank fit() launched
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import asdict
from typing import Any

EXIT_OK, EXIT_FAILURE = 0, 1


def device_type(backend: str, local_world_size: int) -> str:
    """The process group's device: nccl's cuda when there is a GPU per local rank, else gloo's cpu."""
    import torch

    if backend in ("auto", "cuda") and torch.cuda.is_available() and torch.cuda.device_count() >= local_world_size:
        return "cuda"
    return "cpu"


def run_rank(
    config: Any,
    info: Any,
    *,
    job: Any = None,
    share_policy: str = "measured",
    timeout_s: float = 120.0,
    on_event: Any = None,
) -> Any:
    """Train this process's rank of the run; returns its finished TrainingSession. `job`: the
    Job this process built (under torchrun, the script's own), else each rank loads `config.job`."""
    from trainpilot.parallel.group import open_group
    from trainpilot.parallel.launch import write_report
    from trainpilot.parallel.rank_env import local_cores, pin_to
    from trainpilot.parallel.watchdog import Watchdog
    from trainpilot.run.distributed_session import distributed_session

    cores = local_cores(info)
    pin_to(cores)

    def stuck(idle: float) -> None:
        message = (
            f"rank {info.rank}: no step boundary reached for {idle:.0f} s (stuck outside any collective);"
            " ending this rank, the last checkpoint is kept"
        )
        write_report(info.rank, {"status": "failed", "message": message, "exit_code": EXIT_FAILURE, "result": None})
        sys.stderr.write(f"error: {message}\n")
        os._exit(EXIT_FAILURE)

    with open_group(info, device_type(config.backend, info.local_world_size), timeout_s) as group:
        with Watchdog(2 * timeout_s + 30, stuck) as dog:
            session = distributed_session(
                config,
                group,
                job=job,
                share_policy=share_policy,
                threads_per_rank=len(cores) if cores else None,
                heartbeat=dog.beat,
                on_stop=lambda: dog.expire_within(timeout_s),
            )
            for event in session.events():
                if on_event is not None:
                    on_event(event)
            finished = session.finished
            if finished is not None:  # reported inside the group, as the CLI's ranks do (distributed_run.py)
                code = EXIT_OK if finished.status == "success" else EXIT_FAILURE
                result = finished.result if info.is_leader else None
                report = {"status": finished.status, "message": finished.message, "exit_code": code, "result": result}
                write_report(info.rank, report)
    return session


def launch_args(config: Any, share_policy: str, timeout_s: float) -> list[str]:
    """The command line (after `python`) of each rank `fit` launches."""
    return ["-m", "trainpilot.run.rank_run", json.dumps(asdict(config)), share_policy, repr(float(timeout_s))]


def main(argv: list[str]) -> int:
    from trainpilot.parallel.rank_env import RankInfo
    from trainpilot.run.config import SessionConfig

    data, share_policy, timeout_s = json.loads(argv[0]), argv[1], float(argv[2])
    info = RankInfo.from_env()
    if info is None:
        sys.stderr.write("error: trainpilot.run.rank_run runs as a rank of a launched group (RANK, WORLD_SIZE)\n")
        return 2
    session = run_rank(SessionConfig(**data), info, share_policy=share_policy, timeout_s=timeout_s)
    finished = session.finished
    return EXIT_OK if finished is not None and finished.status == "success" else EXIT_FAILURE


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
