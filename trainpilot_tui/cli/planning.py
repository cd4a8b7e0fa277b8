"""`trainpilot headless plan`, `history` and `calibrate`: the cost model from the command line.

Thin: every answer comes from `trainpilot.predict`; this module parses options, shows progress on
stderr and prints tables (or --json) on stdout. Exit codes: 0 ok, 1 failure, 2 usage error.
"""
from __future__ import annotations

import time
from contextlib import contextmanager
from typing import Any, Callable, Iterator, Optional

import typer

from .common import fail, failures_as_one_line, print_json, stderr_console, usage_error
from .options import (
    DATASET_HELP,
    DEFAULT_BATCH_SIZE,
    DEFAULT_MODEL,
    JOB_HELP,
    MEMORY_FORMAT_HELP,
    MODEL_HELP,
    OBJECTIVE_HELP,
    PRECISION_HELP,
    check_job_options,
    check_step_settings,
)

app = typer.Typer(pretty_exceptions_enable=False)


@contextmanager
def _progress_bar(description: str, quiet: bool = False) -> Iterator[Callable[[float, str], None]]:
    """A rich progress bar on stderr driven by the core's (fraction, message) callbacks."""
    if quiet:
        yield lambda _f, _m: None
        return
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    progress = Progress(TextColumn(f"[bold]{description}[/]"), BarColumn(), TextColumn("{task.percentage:>3.0f}%"),
                        TimeElapsedColumn(), TextColumn("[dim]{task.fields[step]}"), console=stderr_console(), transient=True)
    with progress:
        task = progress.add_task(description, total=1.0, step="")
        yield lambda fraction, message: progress.update(task, completed=fraction, step=message)


def _energy(joules: Optional[float], source: Optional[str]) -> str:
    """'12.3 J est.' / '12.3 J' (measured) / '-' (not metered: a run recorded before energy was)."""
    if joules is None:
        return "-"
    from trainpilot.energy import Energy

    return Energy.recorded(joules, source).text


def _micro(value: float) -> str:
    return f"{value * 1e6:.0f} µs" if value < 1e-3 else f"{value * 1e3:.1f} ms"


def _time(value: Optional[float]) -> str:
    """A table cell: the one human time format (trainpilot/units.py), '-' where there is none."""
    from trainpilot.units import seconds

    return "-" if value is None else seconds(value)


def _range(value: Optional[float], low: Optional[float], high: Optional[float]) -> str:
    from trainpilot.units import seconds_range

    return seconds_range(value, low, high) if value is not None else "-"


@app.command("plan")
def plan_command(
    model: Optional[str] = typer.Option(None, "--model", "-m", help=MODEL_HELP, show_default=False),
    dataset: Optional[str] = typer.Option(None, "--dataset", "-d", help=DATASET_HELP),
    job: Optional[str] = typer.Option(None, "--job", help=JOB_HELP),
    epochs: int = typer.Option(3, "--epochs", "-e", help="Epochs the run would train."),
    batch_size: Optional[int] = typer.Option(None, "--batch-size", "-b", show_default=False,
                                             help="Mini-batch size (default 64; a --job sets its own)."),
    layers: Optional[int] = typer.Option(None, "--layers", help="Learnable layers for a zoo model (default per model)."),
    hardware: Optional[str] = typer.Option(None, "--hardware", help="Plan for a described machine instead of this one: a hardware profile (.toml, see profiles/)."),
    nproc: Optional[int] = typer.Option(None, "--nproc", show_default=False, help="Also predict the run on N local ranks (torch.distributed, one core slice each: start-up, each rank's share, the gradient all-reduce) against the best single process, and say which the agent would take."),
    cluster: Optional[str] = typer.Option(None, "--cluster", help="Predict a multi-machine run instead: a cluster file (.toml: nodes, ranks per node, link; see profiles/clusters/) — compute per rank plus the gradient all-reduce, against the best single node."),
    objective: str = typer.Option("time", "--objective", help=OBJECTIVE_HELP),
    memory_format: str = typer.Option("auto", "--memory-format", help=MEMORY_FORMAT_HELP),
    precision: str = typer.Option("fp32", "--precision", help=PRECISION_HELP),
    as_json: bool = typer.Option(False, "--json", help='Print {"chosen": ..., "plans": [...], "observation": ...} on stdout.'),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Every plan by its long label with every figure, and every reason the agent gave."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress on stderr."),
) -> None:
    """Predict every plan and show the agent's choice, without training.

    The first time on a machine this runs a quick calibration (a few seconds) first.
    """
    check_job_options(job, model=model, dataset=dataset, layers=layers, batch_size=batch_size)
    if nproc is not None and nproc < 2:
        usage_error("--nproc must be at least 2 (one process is what the plans above it predict)")
    if nproc is not None and (cluster is not None or hardware is not None):
        usage_error(f"--nproc predicts ranks on this machine; it does not go with {'--cluster' if cluster else '--hardware'} (a cluster file names its own ranks)")
    if epochs < 1:
        usage_error("--epochs must be at least 1")
    batch_size = DEFAULT_BATCH_SIZE if batch_size is None else batch_size
    if batch_size < 1:
        usage_error("--batch-size must be at least 1")
    from trainpilot.energy.objective import check_objective

    try:
        check_objective(objective)
    except ValueError as exc:
        usage_error(str(exc))
    check_step_settings(memory_format, precision)
    from trainpilot.agent.planning import plan_job

    name = model or DEFAULT_MODEL
    config: Any = {"name": name, "layers": layers} if layers else name
    if cluster is not None:
        if hardware is not None:
            usage_error("--cluster names its machines itself; it does not go with --hardware")
        if (memory_format, precision) != ("auto", "fp32"):
            flag = "--memory-format" if memory_format != "auto" else "--precision"
            usage_error(f"--cluster does not go with {flag} (a cluster's ranks are predicted contiguous and in fp32)")
        from .cluster import cluster_command

        cluster_command(cluster, config, dataset, epochs=epochs, batch_size=batch_size, as_json=as_json, job=job)
        return
    with failures_as_one_line(), _progress_bar("calibrating (first time on this machine)", quiet or hardware is not None) as progress:
        report = plan_job(config, dataset, epochs=epochs, batch_size=batch_size, hardware_file=hardware, progress=progress, objective=objective,
                          job=job, memory_format=memory_format, precision=precision, nproc=nproc)
    if as_json:
        print_json(report)
        return
    _print_plan(report, verbose)


def _print_plan(report: dict[str, Any], verbose: bool = False) -> None:
    from rich.console import Console

    console = Console(highlight=False)
    workload = report["workload"]
    for notice in report["notices"]:
        console.print(f"[yellow]note:[/] {notice}")
    where = f"described machine {report['observation']['described_machine']['name']}" if report["described"] else "this machine"
    if verbose:
        _print_plan_verbose(console, report, where)
        return
    from trainpilot.agent.plan_summary import PlanSummary

    from .plan_table import print_summary

    epochs = workload["epochs"]
    console.print(
        f"[bold]{workload['model']}[/] · {workload['params']:,} params · {workload['dataset_size']} samples"
        f" · {epochs} epoch{'s' if epochs != 1 else ''} · batch {workload['batch_size']}"
        + (f" · for the {where}" if report["described"] else "")
        + f" [dim]· thought {report['thinking_ms']:.0f} ms[/]"
    )
    print_summary(console, PlanSummary.from_dict(report["summary"]), decision_first=False)
    if report.get("ranks"):
        _print_ranks(console, report["ranks"])


def _print_ranks(console: Any, ranks: dict[str, Any], verbose: bool = False) -> None:
    """The --nproc block: the ranks' predicted run beside the best single process, and the verdict."""
    from trainpilot.units import seconds

    multi, single = ranks["multi"], ranks["single"]
    n = len(multi["ranks"])
    labels = {r["short_label"] for r in multi["ranks"]}
    each = f"{labels.pop()} each" if len(labels) == 1 else "mixed"
    console.print()
    console.print(f"[bold]{n} ranks[/] ({each}): {seconds(multi['run_s'])} predicted, start-up {seconds(multi['startup_s'])} of it")
    console.print(
        f"  a step {multi['step_s'] * 1e3:.1f} ms: the slowest rank {max(multi['compute_s']) * 1e3:.1f} ms"
        f" on shares {'+'.join(map(str, multi['shares']))}, all-reduce {multi['allreduce_s'] * 1e3:.1f} ms"
    )
    faster = ranks["chosen"] == "multi"
    ratio = single["predicted_s"] / multi["run_s"] if faster else multi["run_s"] / single["predicted_s"]
    how = f"{ratio:.1f}x" if ratio >= 2 else f"{ratio - 1:.0%}"
    verdict = f"the agent would launch {n} ranks ({how} faster)" if faster else f"the agent keeps one process ({how} slower on {n} ranks)"
    console.print(f"best single process: {single['short_label']}, {seconds(single['predicted_s'])}")
    console.print(f"[bold]→ {verdict}[/]")
    if verbose:
        for line in ranks["reasoning"]:
            console.print(f"  [dim]{line}[/]")
    else:
        console.print(f"[dim]start-up: {multi['link']['source'].split('; start-up ', 1)[-1].split(': ', 1)[-1]}[/]")


def _print_plan_verbose(console: Any, report: dict[str, Any], where: str) -> None:
    """Every plan by its long label with every figure, and the agent's every reason (--verbose)."""
    from rich.table import Table

    workload = report["workload"]
    console.print(
        f"[bold]{workload['model']}[/]: {workload['params']:,} params, {workload['dataset_size']} training samples,"
        f" {workload['epochs']} epoch(s), batch {workload['batch_size']} — plans for {where}"
    )
    table = Table(show_edge=False)
    for column in ("plan", "predicted", "energy", "source", "±error", ""):
        table.add_column(column)
    for row in sorted(report["plans"], key=lambda r: (r["predicted_s"] is None, r["predicted_s"] or 0)):
        if row["excluded"] or row["predicted_s"] is None:
            table.add_row(row["label"], "-", "-", "excluded", "", f"[dim]{row['excluded'] or 'no estimate'}[/]")
            continue
        err = f"{row['relative_error']:.0%}" if row.get("relative_error") is not None else ""
        table.add_row(row["label"], _range(row["predicted_s"], row.get("predicted_low_s"), row.get("predicted_high_s")), _energy(row.get("energy_j"), row.get("energy_source")), row["source"], err,
                      "[bold green]chosen[/]" if row["chosen"] else "")
    console.print(table)
    console.print("[dim]predicted: the time and its 80 % interval, from how far this kind of prediction (cold / warm) has missed here[/]")
    # The figure each estimate starts from, once (rows differ only by their thread count).
    sources = sorted({row["energy_source"].split(" x ")[0] for row in report["plans"] if row.get("energy_source")})
    if sources:
        console.print("[dim]energy from: " + "; ".join(sources) + "[/]")
    chosen = report["chosen"]
    margin = f", {chosen['margin']:.0%} ahead of the next plan" if chosen.get("margin") is not None else ""
    energy = f", {_energy(chosen.get('energy_j'), chosen.get('energy_source'))}" if chosen.get("energy_j") is not None else ""
    console.print(
        f"choice: [bold]{chosen['label']}[/], predicted {_range(chosen['predicted_s'], chosen.get('predicted_low_s'), chosen.get('predicted_high_s'))}{energy}{margin}"
        f" (objective {report.get('objective', 'time')}), confidence {chosen['confidence']:.2f} ({chosen['policy']}); thinking took {report['thinking_ms']:.1f} ms"
    )
    for line in report["reasoning"]:
        console.print(f"  [dim]{line}[/]")
    if report.get("ranks"):
        _print_ranks(console, report["ranks"], verbose=True)


@app.command("history")
def history_command(
    limit: int = typer.Option(20, "--limit", "-n", help="Show at most this many runs, newest first."),
    all_machines: bool = typer.Option(False, "--all-machines", help="Include runs recorded on other machines."),
    as_json: bool = typer.Option(False, "--json", help="Print the runs as a JSON list on stdout."),
) -> None:
    """List runs (from their start: running, crashed ones with their resume command) with predicted vs actual time and the error."""
    if limit < 1:
        usage_error("--limit must be at least 1")
    from trainpilot.backends import probe
    from trainpilot.paths import history_db_path
    from trainpilot.predict.history import History, HistoryUnavailable
    from trainpilot.run.runlog import RESUMABLE, checkpoint_exists, effective_status, newest_attempts, resume_command

    try:
        history = History(history_db_path())
        machine = None if all_machines else probe(include_backends=False).machine_id
        # a load phase of a run the agent moved is what the cost model learnt from it, not a run of its own
        runs = [r for r in history.records(machine) if r.status != "phase"][:limit]
    except (HistoryUnavailable, OSError) as exc:
        fail(str(exc))
    stderr = stderr_console()
    for notice in history.notices:
        stderr.print(f"[yellow]note:[/] {notice}")
    # A "running" row whose process is gone crashed; a run's newest attempt with a checkpoint can be resumed.
    statuses = {r.id: effective_status(r) for r in runs}
    resumable = {r.id for r in newest_attempts(runs) if statuses[r.id] in RESUMABLE and checkpoint_exists(r.run_id)}
    if as_json:
        print_json([dict(r.to_dict(), status=statuses[r.id], resume_command=resume_command(r.run_id) if r.id in resumable else None) for r in runs])
        return
    if not runs:
        stderr.print(f"no runs recorded yet in {history.path}")
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(show_edge=False)
    table.add_column("run", no_wrap=True, min_width=max(len(r.run_id) for r in runs))  # the id to pass to --resume, whole
    for column in ("when", "model", "plan", "busy cores", "predicted", "actual", "error", "epochs", "energy", "status"):
        table.add_column(column)
    for r in runs:
        err = f"{r.error:+.0%}" if r.error is not None else "-"
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(r.started_at or r.recorded_at))
        status = statuses[r.id]
        if status in ("running", "crashed"):  # no actual time yet: say how far its checkpoints got
            status += f", checkpoint after epoch {r.checkpoint_epoch}" if r.checkpoint_epoch else ", no checkpoint yet"
        actual = _time(r.actual_s) if r.actual_s > 0 else "-"
        table.add_row(r.run_id, when, r.model, r.plan.short_label, f"{r.busy_cores:.1f}", _time(r.predicted_s), actual, err, f"{r.epochs_done}/{r.epochs}",
                      _energy(r.energy_j, r.energy_source), status)
    console = Console(highlight=False)
    console.print(table)
    for r in runs:
        if r.id in resumable:
            console.print(f"{r.run_id} {statuses[r.id]}: resume with `{resume_command(r.run_id)}`", soft_wrap=True, markup=False)


@app.command("calibrate")
def calibrate_command(
    quick: bool = typer.Option(False, "--quick", help="About 10 s instead of about 45 s (2 cores): fewer micro-benchmarks, shorter timings."),
    compile: bool = typer.Option(False, "--compile", help="Measure torch.compile instead: compile time per layer kind and the compiled step's speed, so compiled CPU plans can be predicted (about a minute on 2 cores; needs a C++ compiler)."),
    loopback: bool = typer.Option(False, "--loopback", help="Measure only the loopback link multi-process ranks all-reduce over (two gloo processes, a few seconds) and cache it."),
    as_json: bool = typer.Option(False, "--json", help="Print the stored calibration as JSON on stdout."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bar on stderr."),
) -> None:
    """Measure this machine for the cost model: every plan, idle and next to one busy core.

    Measures sustained FLOP/s of conv, dense and recurrent layers, per-step and per-layer costs and
    memory bandwidth, and stores them per machine in TrainPilot's data directory. With --compile,
    measures what torch.compile costs and gives here and adds it (a later plain calibrate keeps it).
    """
    if compile and quick:
        usage_error("--compile has no quick mode: compiling each network is what takes the time")
    if loopback:
        from .cluster import loopback_command

        loopback_command(as_json)
        return
    from trainpilot.predict import CostModel

    try:
        model = CostModel.open()
        title = "measuring torch.compile" if compile else "calibrating" + (" (quick)" if quick else "")
        with _progress_bar(title, quiet) as progress:
            calibration = model.calibrate_compile(progress=progress) if compile else model.calibrate(progress=progress, quick=quick)
        power, no_power = (None, "") if compile else _calibrate_power(model, quiet)
    except OSError as exc:
        fail(f"cannot store the calibration: {exc.strerror or exc}")
    except RuntimeError as exc:  # torch.compile cannot run here (no compiler), or compiling failed
        fail(str(exc))
    if as_json:
        data = calibration.to_dict()
        if not compile:
            data["power"] = power.to_dict() if power is not None else {"not_measured": no_power}
        print_json(data)
        return
    _print_calibration(calibration, model)
    if not compile:
        _print_power(power, no_power)
    if calibration.compile is not None:
        _print_compile(calibration.compile)


def _calibrate_power(model: Any, quiet: bool) -> tuple[Any, str]:
    """Power per plan where RAPL/NVML measure it (energy/power_calibration.py); about a second a plan."""
    from trainpilot.energy.power_calibration import calibrate_power

    with _progress_bar("measuring power", quiet) as progress:
        return calibrate_power(model, progress=progress)


def _print_power(power: Any, why: str) -> None:
    from rich.console import Console

    console = Console(highlight=False)
    if power is None:
        console.print(f"power per plan: not measured — {why}")
        return
    plans = ", ".join(f"{key} {watts:.1f} W" for key, watts in power.watts.items())
    idle = f"; idle {power.idle_w:.1f} W" if power.idle_w is not None else ""
    console.print(f"power per plan ({power.source}): {plans}{idle}")


def _print_calibration(calibration: Any, model: Any) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console(highlight=False)
    table = Table(show_edge=False)
    for column in ("plan", "state", "conv GFLOP/s", "dense GFLOP/s", "LSTM GFLOP/s", "per step", "per layer", "fit error"):
        table.add_column(column)

    def gflops(rates: Any, kind: str) -> str:
        value = rates.sustained_flops.get(kind)  # measured over whole training steps
        return f"{value / 1e9:.1f}" if value else "-"

    for pc in calibration.plans.values():
        for state, rates in (("idle", pc.idle), ("1 core busy", pc.busy)):
            if rates is None:
                continue
            table.add_row(pc.plan.label, state, gflops(rates, "conv"), gflops(rates, "dense"), gflops(rates, "recurrent"),
                          _micro(rates.coef["step"]), _micro(rates.coef["layer"]), f"{rates.fit_error:.0%}")
    console.print(table)
    console.print(f"calibrated {len(calibration.plans)} plan(s) in {calibration.duration_s:.1f} s; stored under {model.calibration_dir}")
    for note in calibration.notes:
        console.print(f"[yellow]note:[/] {note}")


def _print_compile(cc: Any) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console(highlight=False)
    table = Table(show_edge=False, title=f"torch.compile at {cc.threads} thread(s), measured with inductor's caches off")
    for column in ("network", "eager step", "compiled", "ratio", "1st compile", "new shape"):
        table.add_column(column)
    for s in cc.samples:
        table.add_row(s.name, _micro(s.eager_step_s), _micro(s.compiled_step_s), f"{s.compiled_step_s / s.eager_step_s:.2f}x",
                      _time(s.first_compile_s), _time(s.recompile_s))
    console.print(table)
    per_layer = ", ".join(f"{k} {v:.1f} s" for k, v in cc.per_layer_s.items() if v > 0) or "-"
    console.print(f"compile time per layer: {per_layer}; start-up {cc.once_s:.1f} s; measured in {cc.duration_s:.0f} s")
