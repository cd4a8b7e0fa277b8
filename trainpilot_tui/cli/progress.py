"""Renders a session's events on stderr: the agent's reasoning as lines, training as a progress bar.

stdout stays clean for --json / --jsonl, so `trainpilot headless run --json | jq` works.
"""
from __future__ import annotations

from typing import Any

from trainpilot import events as ev
from trainpilot.energy import Energy
from trainpilot.units import seconds_range


class StderrProgress:
    def __init__(self, quiet: bool = False):
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        self.console = Console(stderr=True, highlight=False)
        self.quiet = quiet
        self.progress = Progress(
            TextColumn("[bold]epoch {task.fields[epoch]}/{task.fields[epochs]}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("loss {task.fields[loss]:.3f}"),
            TimeElapsedColumn(),
            TextColumn("ETA {task.fields[eta]}"),
            console=self.console,
            transient=True,
        )
        self.task: Any = None
        self.epochs = 0
        self.metric = "accuracy"  # the job's metric, as the session names it

    def __enter__(self) -> "StderrProgress":
        if not self.quiet:
            self.progress.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        if not self.quiet:  # stopping a bar never started still prints a newline before the `error:` line
            self.progress.stop()

    def _line(self, text: str) -> None:
        if not self.quiet:
            self.progress.console.print(text, soft_wrap=True)

    def handle(self, event: ev.Event) -> None:
        if isinstance(event, ev.SessionStarted):
            self.epochs = event.epochs
            self.metric = metric_name(event)
            resumed = f", resuming at epoch {event.resumed_from_epoch + 1}" if event.resumed_from_epoch else ""
            self._line(f"[bold]run {event.run_id}[/]: {event.model} on {event.dataset} ({event.train_samples} train / {event.val_samples} validation samples){resumed}")
        elif isinstance(event, ev.AgentStepped):
            self._line(f"[dim]{event.phase:>7}[/] {event.text}")
        elif isinstance(event, ev.BackendChosen):
            reason = "" if event.source == "agent" else f": {event.reason}"
            self._line(f"[bold]    act[/] train on {event.plan.label} [dim]({event.source}{reason})[/]")
        elif isinstance(event, ev.OverrideRefused):
            self._line(f"[yellow]override to {event.requested} refused: {event.reason}[/]")
        elif isinstance(event, ev.StepProgressed):
            eta = seconds_range(event.eta_s, event.eta_low_s, event.eta_high_s) if event.eta_s is not None else "?"
            if self.task is None:
                self.task = self.progress.add_task("train", total=event.steps_per_epoch, epoch=event.epoch, epochs=self.epochs, loss=event.loss, eta=eta)
            self.progress.update(self.task, completed=event.step, total=event.steps_per_epoch, epoch=event.epoch, loss=event.loss, eta=eta)
        elif isinstance(event, ev.EpochTimed):
            pred = seconds_range(event.predicted_s, event.predicted_low_s, event.predicted_high_s) if event.predicted_s is not None else "n/a"
            energy = f", {Energy.recorded(event.energy_j, event.energy_source).text}" if event.energy_j is not None else ""
            figures = epoch_figures(event, self.metric)
            self._line(f"  epoch {event.epoch}: loss {event.loss:.3f}{figures}; predicted {pred}, actual {event.actual_s:.2f}s{energy} on {event.plan.label}")
        elif isinstance(event, ev.RunFinished) and event.status != "failed":  # failures: one `error:` line from the command
            style = {"success": "green", "interrupted": "yellow"}.get(event.status, "red")
            self._line(f"[{style}]{event.status}[/]: {event.message}")


def metric_name(started: ev.SessionStarted) -> str:
    """The name of the job's metric ("accuracy" for the zoo). Events that do not carry it yet say
    accuracy: a job without a metric shows as such by its epochs' figures being None."""
    return str(getattr(started, "metric", None) or "accuracy")


def epoch_figures(event: ev.EpochTimed, metric: str) -> str:
    """', acc 56.1%, val acc 60.0%' for accuracy; a job's own metric by its name ('r2 0.813'); with
    no metric the validation loss ('val loss 0.715') where the event carries it."""

    def shown(value: float) -> str:
        return f"{value:.1%}" if metric == "accuracy" else f"{value:.4g}"

    label = "acc" if metric == "accuracy" else metric
    out = f", {label} {shown(event.accuracy)}" if event.accuracy is not None else ""
    if event.val_accuracy is not None:
        out += f", val {label} {shown(event.val_accuracy)}"
    elif (val_loss := event.val_loss) is not None:
        out += f", val loss {val_loss:.4g}"
    return out
