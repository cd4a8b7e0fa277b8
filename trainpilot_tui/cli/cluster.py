"""`trainpilot headless plan --cluster FILE`: the scale-out prediction as a table or --json.
Thin: the answer is `trainpilot.parallel.cluster.plan_cluster`'s. A bad cluster file is a usage
error (exit 2, one line naming the file and the key); a prediction that cannot be made exits 1."""
from __future__ import annotations

from typing import Any, Optional

from .common import EXIT_USAGE, fail, failures_as_one_line, print_json


def _ms(seconds: float) -> str:
    return f"{seconds * 1e6:.0f} µs" if seconds < 1e-3 else f"{seconds * 1e3:.2f} ms"


def cluster_command(path: str, model: Any, dataset: Optional[str], *, epochs: int, batch_size: int, as_json: bool, job: Optional[str] = None) -> None:
    from trainpilot.errors import ConfigError
    from trainpilot.parallel.cluster import load_cluster, plan_cluster
    from trainpilot.agent.planning import profile_job

    try:
        cluster = load_cluster(path)
    except ConfigError as exc:
        fail(str(exc), EXIT_USAGE)
    with failures_as_one_line(also=(ValueError,)):
        if job is not None:  # the user's own job, as each of its ranks would build it
            from trainpilot.job.job_file import load_job
            from trainpilot.job.prepare import prepare

            profile = prepare(load_job(job), epochs=epochs).profile
        else:
            profile, _data = profile_job(model, dataset, epochs=epochs, batch_size=batch_size)
        report = plan_cluster(cluster, profile)
    if as_json:
        print_json(report)
        return
    _print(report)


def _print(report: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console(highlight=False)
    c, w = report["cluster"], report["workload"]
    link = c["link"]
    console.print(f"[bold]{c['name']}[/]: {c['ranks']} rank(s), link {link['bandwidth_bytes_per_s'] / 1e9:.3g} GB/s,"
                  f" {link['latency_s'] * 1e6:.0f} µs — {w['model']}, batch {w['batch_size']}, {w['epochs']} epoch(s)")
    table = Table(show_edge=False)
    for column in ("rank", "node", "machine", "plan", "share", "compute / step"):
        table.add_column(column)
    for r in report["ranks"]:
        table.add_row(str(r["rank"]), str(r["node"]), r["machine"], r["label"], str(r["share"]), _ms(r["compute_s"]))
    console.print(table)
    console.print(f"all-reduce of {report['gradient_bytes'] / 2**20:.2f} MiB of gradients per step: {_ms(report['allreduce_s'])}"
                  f" (ring over {c['ranks']} ranks); step {_ms(report['step_s'])}; run predicted {report['predicted_s']:.2f} s")
    for node in report["single_nodes"]:
        console.print(f"  alone, node {node['node']} ({node['machine']}, {node['label']}): {node['predicted_s']:.2f} s")
    console.print(f"[bold]{report['verdict']}[/]")
    for note in report["notes"]:
        console.print(f"[dim]note: {note}[/]")


def loopback_command(as_json: bool) -> None:
    """`calibrate --loopback`: measure (again) and cache the gloo loopback link."""
    from trainpilot.parallel.link import loopback_link

    try:
        link = loopback_link(refresh=True)
    except (RuntimeError, OSError) as exc:
        fail(str(exc))
    if as_json:
        print_json(link.to_dict())
        return
    print(f"loopback (gloo all-reduce, 2 processes): {link.bandwidth_bytes_per_s / 1e9:.2f} GB/s, {link.latency_s * 1e6:.0f} µs latency"
          f" per ring phase; ranks start and form a group in {link.startup_s:.1f} s")
