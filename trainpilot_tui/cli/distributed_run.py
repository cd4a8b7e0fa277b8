"""`headless run` as several ranks: `--nproc N` launches N local ranks; a process started by
torchrun (RANK/WORLD_SIZE set) runs as one rank. Progress and --json come from rank 0 only."""
from __future__ import annotations

import json
import os
import sys
from typing import Any, NoReturn, Optional

import typer

from .common import EXIT_FAILURE, EXIT_OK, EXIT_SIGINT, fail, print_json



def child_args(options: dict[str, Any]) -> list[str]:
    """The `python -m trainpilot_tui headless run ...` command line each local rank runs: the
    parent's options without --nproc/--json (the parent prints the one result)."""
    args = ["-m", "trainpilot_tui", "headless", "run"]
    for name, value in options.items():
        flag = "--" + name.replace("_", "-")
        if value is None or value is False:
            continue
        args += [flag] if value is True else [flag, str(value)]
    return args


def run_local_ranks(nproc: int, options: dict[str, Any], *, as_json: bool, timeout_s: float) -> NoReturn:
    from trainpilot.parallel.launch_cost import learning_launch

    # a first calibration before the launch, which rank 0 predicts (as a single process's first run does)
    say = None if options.get("quiet") else (lambda line: typer.echo(f"observe {line}", err=True))
    outcome = learning_launch(nproc, child_args(options), shutdown_timeout_s=timeout_s, say=say)
    lead = outcome.leader.report or {}
    if as_json and lead.get("result") is not None:
        print_json(lead["result"])
    if outcome.ok:
        raise typer.Exit(EXIT_OK)
    if lead.get("status") == "interrupted":
        typer.echo(f"interrupted: {lead.get('message')}", err=True)
        raise typer.Exit(int(lead.get("exit_code") or EXIT_SIGINT))
    fail(outcome.failure_message())


def run_as_rank(config: Any, info: Any, *, as_json: bool, jsonl: bool, quiet: bool, timeout_s: float, share_policy: str, verbose: bool = False) -> NoReturn:
    """This process is rank `info.rank` of a group a launcher started."""
    from trainpilot import events as ev
    from trainpilot.parallel.group import open_group
    from trainpilot.parallel.launch import launched_by_trainpilot, write_report
    from trainpilot.parallel.rank_env import local_cores, pin_to
    from trainpilot.run.distributed_session import distributed_session
    from trainpilot.run.rank_run import device_type
    from trainpilot.parallel.watchdog import Watchdog
    from trainpilot.errors import TrainPilotError

    from .progress import StderrProgress
    from .signals import SignalStop

    child = launched_by_trainpilot()  # our own --nproc parent prints the result and the error line
    cores = local_cores(info)
    pin_to(cores)

    def report(status: str, message: str, code: int, result: Optional[dict] = None) -> None:
        write_report(info.rank, {"status": status, "message": message, "exit_code": code, "result": result if info.is_leader else None})

    def stuck(idle: float) -> None:
        message = f"rank {info.rank}: no step boundary reached for {idle:.0f} s (stuck outside any collective, or asked to stop and unable to); ending this rank, the last checkpoint is kept"
        report("failed", message, EXIT_FAILURE)
        if not child:
            sys.stderr.write(f"error: {message}\n")
            sys.stderr.flush()
        os._exit(EXIT_FAILURE)

    finished: Any = None
    code = EXIT_FAILURE
    try:
        with open_group(info, device_type(config.backend, info.local_world_size), timeout_s) as group, Watchdog(2 * timeout_s + 30, stuck) as dog:
            session = distributed_session(config, group, share_policy=share_policy, threads_per_rank=len(cores) if cores else None, heartbeat=dog.beat, on_stop=lambda: dog.expire_within(timeout_s))
            with SignalStop(session) as stop:
                with StderrProgress(quiet=quiet or not info.is_leader, verbose=verbose) as progress:
                    for event in session.events():
                        progress.handle(event)
                        if jsonl and info.is_leader:
                            sys.stdout.write(json.dumps(ev.event_to_dict(event), default=str) + "\n")
                            sys.stdout.flush()
                        if isinstance(event, ev.RunFinished):
                            finished = event
                assert finished is not None
                code = {"success": EXIT_OK, "interrupted": stop.code or EXIT_SIGINT}.get(finished.status, EXIT_FAILURE)
                # Tell the outcome now, while SIGTERM still only asks for a stop. When a peer died
                # the launcher is already stopping the survivors: its SIGTERM may land while the
                # broken group closes, after this block has given SIGTERM back its default action,
                # and a rank killed before it reported leaves "killed by SIGTERM" where its reason
                # and checkpoint should be (seen on CI).
                _tell(finished, code, report, leader=info.is_leader, rank=info.rank, as_json=as_json, child=child)
    except TrainPilotError as exc:  # could not join the group, or a peer vanished before training began
        report("failed", str(exc), EXIT_FAILURE)
        if not child:
            typer.echo(f"error: {exc}", err=True)
        _end(EXIT_FAILURE)
    _end(code)


def _tell(finished: Any, code: int, report: Any, *, leader: bool, rank: int, as_json: bool, child: bool) -> None:
    """The rank's report for our own --nproc parent, or, under another launcher, its own lines:
    the leader's --json result, and an `interrupted:` or `error:` line."""
    report(finished.status, finished.message, code, finished.result)
    if child:
        return
    if leader and as_json:
        print_json(finished.result)
    if code != EXIT_OK:
        if finished.status == "interrupted":
            if leader:
                typer.echo(f"interrupted: {finished.message}", err=True)
        else:
            said = finished.message if finished.message.startswith("rank ") else f"rank {rank}: {finished.message}"
            typer.echo(f"error: {said}", err=True)
    # Out of the buffers now, not only at _end: the SIGTERM this is early for may still kill the
    # process before it gets there, and a --json result on a pipe sits in a block buffer.
    sys.stdout.flush()
    sys.stderr.flush()


def _end(code: int) -> NoReturn:
    """Leave without the interpreter's teardown: the group is closed and the report written, and
    tearing down torch's c10d/gloo threads at exit aborted a finished rank now and then here
    (SIGABRT, exit -6, which the launcher would report as a failed run)."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def dispatch_distributed(config: Any, *, nproc: Optional[int], timeout: float, shares: str, as_json: bool, jsonl: bool, quiet: bool, options: dict[str, Any]) -> None:
    """Return when this is a plain single-process run; otherwise run the distributed form and exit."""
    from trainpilot.parallel.rank_env import RankInfo
    from trainpilot.errors import TrainPilotError

    from .common import usage_error

    try:
        info = RankInfo.from_env()
    except TrainPilotError as exc:
        usage_error(str(exc))
    if nproc is None and info is None:
        return
    if nproc is not None and nproc < 1:
        usage_error("--nproc must be at least 1")
    if not timeout > 0:
        usage_error("--timeout must be a positive number of seconds")
    from trainpilot.parallel.rank_speed import SHARE_POLICIES

    if shares not in SHARE_POLICIES:
        usage_error(f"--shares must be one of {', '.join(SHARE_POLICIES)}, got '{shares}'")
    if config.backend in ("ane", "mps"):
        usage_error(f"--backend {config.backend} cannot run as several ranks (torch.distributed has gloo for the CPU and nccl for CUDA)")
    if config.compile:
        usage_error("--compile does not go with a distributed run (DDP of a compiled model is not offered)")
    if config.freeze is not None:
        usage_error("--freeze (the ANE) does not go with a distributed run")
    if info is not None:
        if nproc not in (None, info.world_size):
            usage_error(f"--nproc {nproc} inside a launched group of {info.world_size} ranks; leave --nproc to the launcher")
        run_as_rank(config, info, as_json=as_json, jsonl=jsonl, quiet=quiet, timeout_s=timeout, share_policy=shares, verbose=bool(options.get("verbose")))
    if nproc == 1:
        return  # one rank is a plain run
    run_local_ranks(nproc, options, as_json=as_json, timeout_s=timeout)  # type: ignore[arg-type]
