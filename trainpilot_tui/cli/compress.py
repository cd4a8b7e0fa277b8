"""`trainpilot headless compress`: hardware-aware compression from the command line.

Thin: the job is `trainpilot.compress.run_compression`; this module checks the options, prints the
job's progress on stderr and the result (or --json) on stdout. Exit codes: 0 deployed, 1 not
deployed (the reason on one `error:` line) or bad input, 2 usage error.
"""
from __future__ import annotations

from typing import Any, Optional

import typer

from .common import EXIT_FAILURE, fail, failures_as_one_line, print_json, stderr_console, usage_error
from .options import DATASET_HELP, DEFAULT_MODEL, MODEL_HELP, check_job_options

JOB_HELP = (
    "Your own job instead of --model/--dataset: FILE.py:FUNCTION returning a trainpilot.Job that is a classifier"
    " with metric=\"accuracy\", whose data is (X, y) with float inputs and integer labels (or a Dataset of such"
    " pairs, read into memory) and whose model torch-pruning can trace. Compression trains the model from its"
    " initial weights with its own recipe; the job's loss and optimizer are not used. The file runs with your"
    " rights, like `python FILE.py`."
)


def compress_command(
    model: Optional[str] = typer.Option(None, "--model", "-m", help=MODEL_HELP, show_default=False),
    dataset: Optional[str] = typer.Option(None, "--dataset", "-d", help=DATASET_HELP),
    job: Optional[str] = typer.Option(None, "--job", help=JOB_HELP),
    target_speedup: float = typer.Option(1.5, "--target-speedup", help="Step-time speed-up the pruned model must reach on the target (> 1)."),
    max_accuracy_drop: float = typer.Option(1.0, "--max-accuracy-drop", help="Accuracy points the pruned model may lose on the test split (>= 0)."),
    hardware: Optional[str] = typer.Option(None, "--hardware", help="Compress for a described machine (a shipped profile name such as apple-m2, or a .toml): its cycles are predicted. Default: this machine, measured."),
    episodes: int = typer.Option(24, "--episodes", "-n", help="Search episodes (one configuration each)."),
    search_seconds: float = typer.Option(45.0, "--search-seconds", help="Seconds the search may keep going past --episodes (up to 4x as many episodes): a cheap model gets more of them."),
    threads: Optional[int] = typer.Option(None, "--threads", help="CPU threads (default: the agent's thread plan)."),
    batch_size: int = typer.Option(64, "--batch-size", "-b", help="Mini-batch size for training and fine-tuning."),
    timing_batch: Optional[int] = typer.Option(None, "--timing-batch", help="Batch whose step time is measured (default: --batch-size)."),
    dense_epochs: Optional[float] = typer.Option(None, "--dense-epochs", help="Epochs to train the dense model first. Default: 48, but at least 2400 steps at batch 64 (as many samples seen at another batch): a small data set needs more passes to converge, and a dense model short of convergence flatters the pruned one."),
    finetune_steps: int = typer.Option(100, "--finetune-steps", help="Fine-tuning steps after each pruning in the search (the reward's short fine-tune)."),
    deploy_epochs: Optional[float] = typer.Option(None, "--deploy-epochs", help="Epochs of fine-tuning for the deployed model and the baselines. Default: half the dense model's steps."),
    finalists: int = typer.Option(3, "--finalists", help="At least this many of the search's best configurations get the deployment fine-tune (more while that costs less than the search did); the one with the lowest validation loss is deployed."),
    baseline_finalists: bool = typer.Option(True, "--baseline-finalists/--no-baseline-finalists", help="Uniform pruning and L1-magnitude pruning at the target speed join the finalists and get the same fine-tune, so the model deployed is the best on validation of everything found; the report says which kind won."),
    deploy_rule: str = typer.Option("point", "--deploy-rule", help="How the accuracy drop and the speed-up are read. point: deploy when the measured drop is within --max-accuracy-drop and the measured speed-up clears --target-speedup, and say how sure each is. confident: deploy only when the upper end of the drop's 95% paired interval is within it and the lower end of the speed-up's 95% interval clears the target (on a small test split, rarely)."),
    timing_seconds: float = typer.Option(5.0, "--timing-seconds", help="Seconds one speed-up decision (a growth step, a baseline's confirmation, the deployed model) may spend timing more rounds, past the first 21, until the speed-up's 95% interval lies on one side of the target."),
    free_channels: bool = typer.Option(True, "--free-channels/--no-free-channels", help="Before its fine-tune, give each finalist back the channels the target does not charge for: per layer, the most that keep the measured speed-up's 95% interval above the target and its point at the search's aim past this machine's noise (step time falls in steps, not channel by channel)."),
    layers: Optional[int] = typer.Option(None, "--layers", help="Learnable layers for a zoo model (default per model)."),
    out: Optional[str] = typer.Option(None, "--out", "-o", help="Export directory for the deployed model (must not exist; default: TrainPilot's data directory/compressed/)."),
    seed: int = typer.Option(0, "--seed", help="Seed for weights, splits and the agent."),
    as_json: bool = typer.Option(False, "--json", help="Print the result as one JSON object on stdout."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress on stderr."),
) -> None:
    """Prune the model for the target machine until it steps faster at the same accuracy.

    A TD3 agent gives every layer its sparsity; the pruned model must run faster (measured here,
    predicted on a described machine) at the same accuracy, and it is exported only when both
    thresholds hold.

    Exit codes: 0 deployed, 1 not deployed or bad input (one `error:` line), 2 usage error.
    """
    from trainpilot.compress import CompressConfig, run_compression

    check_job_options(job, model=model, dataset=dataset, layers=layers)
    name = model or DEFAULT_MODEL
    config = CompressConfig(
        model={"name": name, "layers": layers} if layers else name, dataset=dataset, job=job,
        target_speedup=target_speedup, max_accuracy_drop=max_accuracy_drop, hardware=hardware, episodes=episodes, search_seconds=search_seconds,
        threads=threads, batch_size=batch_size, timing_batch=timing_batch, dense_epochs=dense_epochs, finetune_steps=finetune_steps, deploy_epochs=deploy_epochs,
        finalists=finalists, free_channels=free_channels, baseline_finalists=baseline_finalists, deploy_rule=deploy_rule, timing_seconds=timing_seconds,
        out=out, seed=seed,
    )
    problems = config.problems()
    if problems:
        usage_error(problems[0])
    progress = _Progress(quiet)
    with failures_as_one_line("export"):
        report = run_compression(config, on_event=progress.handle)
    result = report.to_dict()
    if as_json:
        print_json(result)
    else:
        _print_summary(result)
    if not report.deployed:
        fail(result["reason"], EXIT_FAILURE)


class _Progress:
    """The job's events as lines on stderr (stdout stays clean for --json)."""

    def __init__(self, quiet: bool):
        self.quiet = quiet
        self.console = stderr_console()

    def handle(self, event: Any) -> None:
        if self.quiet:
            return
        from trainpilot.compress import events as ev

        if isinstance(event, ev.StageStarted):
            self.console.print(f"[bold]{event.stage:>9}[/] {event.text}")
        elif isinstance(event, ev.DenseTrained):
            self.console.print(f"[bold]    dense[/] validation {event.val_accuracy:.1%}, test {event.test_accuracy:.1%} in {event.seconds:.1f}s; threads: {event.threads} ({event.threads_reason})")
        elif isinstance(event, ev.Notice):
            self.console.print(f"[yellow]note:[/] {event.text}", highlight=False)
        elif isinstance(event, ev.AimMeasured):
            self.console.print(f"[bold]      aim[/] {event.text()}", highlight=False)
        elif isinstance(event, ev.SpeedMeasured):
            self.console.print(f"[bold] measured[/] {event.text()}", highlight=False)
        elif isinstance(event, ev.Tested):
            self.console.print(f"[bold]   tested[/] {event.kind}: test {event.accuracy:.1%}, drop {event.drop.text()}", highlight=False)
        elif isinstance(event, ev.EpisodeEvaluated):
            e = event.evaluation
            kept = " ".join(str(v) for v in e.kept.values())
            best = f"; best so far {event.best.speedup_text()} at {event.best.accuracy:.1%}" if event.best is not None else ""
            self.console.print(f"  episode {event.episode:>3}/{event.episodes}: channels {kept}, {e.cycles} speed-up {e.speedup_text()},"
                               f" validation {e.accuracy:.1%}, reward {e.reward.value:+.2f}{best}")


def _print_summary(result: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console(highlight=False)
    table = Table(show_edge=False, title=f"{result['model']} on {result['dataset']}: per-layer plan")
    for column in ("layer", "kind", "channels", "kept", "sparsity", "FLOPs share"):
        table.add_column(column)
    for layer in result["layers"]:
        table.add_row(layer["name"], layer["kind"], str(layer["out_channels"]), str(layer["kept_channels"]),
                      f"{layer['sparsity']:.0%}", f"{layer['flops_share']:.0%}")
    console.print(table)
    if result["step_time_dense_s"] is not None:
        console.print(f"step time (measured, {result['threads']} threads, batch {result['timing_batch']}): dense {result['step_time_dense_s'] * 1e3:.2f} ms,"
                      f" pruned {result['step_time_pruned_s'] * 1e3:.2f} ms -> {result['speedup_measured']:.2f}x measured"
                      f" ({result['speedup_confidence']:.0%} interval {result['speedup_low']:.2f} to {result['speedup_high']:.2f}x over {result['speedup_rounds']} rounds)")
    for name, p in result["predicted"].items():
        console.print(f"  {name}: {p['speedup']:.2f}x predicted ({p['where']})")
    if result["accuracy_pruned"] is not None:
        console.print(f"accuracy (test): dense {result['accuracy_dense']:.1%}, pruned {result['accuracy_pruned']:.1%}, drop {result['accuracy_drop']:.2f} points"
                      f" ({result['accuracy_drop_confidence']:.0%} paired interval {result['accuracy_drop_low']:.2f} to {result['accuracy_drop_high']:.2f};"
                      f" {result['test_samples_lost']} lost, {result['test_samples_gained']} gained of {result['samples']['test']})")
        console.print(f"{'deployed' if result['deployed'] else 'chosen'} configuration: {result['chosen_kind']} (deployment rule: {result['deploy_rule']})")
    console.print(result["reason"])
    for note in result["notes"]:
        console.print(f"[yellow]note:[/] {note}")
    for path in [*result["exported"].values(), *result["saved_not_deployed"].values()]:
        console.print(f"  wrote {path}")
