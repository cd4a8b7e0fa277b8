"""Renders a session's events on stderr: the agent's reasoning as lines, training as a progress bar.

stdout stays clean for --json / --jsonl, so `trainpilot headless run --json | jq` works.
"""
from __future__ import annotations

from typing import Any

from trainpilot import events as ev
from trainpilot.energy import Energy
from trainpilot.units import seconds_range


# The longest line the compact trace prints; the full text stays in --verbose and --jsonl.
MAX_LINE = 160


def clipped(text: str, limit: int = MAX_LINE) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


class StderrProgress:
    """verbose: every line the agent says (each plan's prediction, every reason) with long plan
    labels; otherwise the decision as one table (cli/plan_table.py) and no line over MAX_LINE."""

    def __init__(self, quiet: bool = False, verbose: bool = False):
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        self.console = Console(stderr=True, highlight=False)
        self.quiet = quiet
        self.verbose = verbose
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

    def _line(self, text: str, head: str = "", style: str = "dim") -> None:
        """One trace line: `head` in `style`, then `text` as it is (no markup), the whole clipped
        to MAX_LINE unless verbose."""
        if self.quiet:
            return
        from rich.text import Text

        whole = head + text
        line = Text.assemble((head, style), whole[len(head) :] if self.verbose else clipped(whole)[len(head) :])
        self.progress.console.print(line, soft_wrap=True)

    def _summary(self, step: ev.AgentStepped) -> bool:
        """The compact trace's view of an agent step: the decision as a table, the lines it sums up
        left out. False: print the step as it is."""
        part = step.data.get("part")
        if self.verbose or (part is None and "summary" not in step.data):
            return False
        if "summary" in step.data and not self.quiet:
            from trainpilot.agent.plan_summary import PlanSummary

            from .plan_table import print_summary

            console = self.progress.console
            width = min(console.width, MAX_LINE)
            print_summary(_Narrow(console, width), PlanSummary.from_dict(step.data["summary"]), decision_first=True)
        return True

    def handle(self, event: ev.Event) -> None:
        if isinstance(event, ev.SessionStarted):
            self.epochs = event.epochs
            self.metric = metric_name(event)
            resumed = f", resuming at epoch {event.resumed_from_epoch + 1}" if event.resumed_from_epoch else ""
            self._line(f": {event.model} on {event.dataset} ({event.train_samples} train / {event.val_samples} validation samples){resumed}", f"run {event.run_id}", "bold")
        elif isinstance(event, ev.AgentStepped):
            if not self._summary(event):
                self._line(event.text, f"{event.phase:>7} ")
        elif isinstance(event, ev.BackendChosen):
            reason = "" if event.source == "agent" else f": {event.reason}"
            label = event.plan.label if self.verbose else event.plan.short_label
            self._line(f"train on {label} ({event.source}{reason})", "    act ", "bold")
        elif isinstance(event, ev.OverrideRefused):
            self._line(f"to {event.requested}: {event.reason}", "override refused ", "yellow")
        elif isinstance(event, ev.StepProgressed):
            eta = seconds_range(event.eta_s, event.eta_low_s, event.eta_high_s) if event.eta_s is not None else "?"
            if self.task is None:
                self.task = self.progress.add_task("train", total=event.steps_per_epoch, epoch=event.epoch, epochs=self.epochs, loss=event.loss, eta=eta)
            self.progress.update(self.task, completed=event.step, total=event.steps_per_epoch, epoch=event.epoch, loss=event.loss, eta=eta)
        elif isinstance(event, ev.EpochTimed):
            pred = seconds_range(event.predicted_s, event.predicted_low_s, event.predicted_high_s) if event.predicted_s is not None else "n/a"
            energy = f", {Energy.recorded(event.energy_j, event.energy_source).text}" if event.energy_j is not None else ""
            figures = epoch_figures(event, self.metric)
            label = event.plan.label if self.verbose else event.plan.short_label
            self._line(f"epoch {event.epoch}: loss {event.loss:.3f}{figures}; predicted {pred}, actual {event.actual_s:.2f}s{energy} on {label}", "  ")
        elif isinstance(event, ev.RunFinished) and event.status != "failed":  # failures: one `error:` line from the command
            style = {"success": "green", "interrupted": "yellow"}.get(event.status, "red")
            self._line(f": {event.message}", event.status, style)
        if isinstance(event, ev.RunFinished):
            for note in event.result.get("not_recorded") or ():  # said even with --quiet: a record lost
                self.progress.console.print(f"warning: not recorded in the history: {note}", style="yellow", soft_wrap=True)


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


class _Narrow:
    """A console's print at most `width` cells wide: the decision's table and lines in a wide
    terminal stay within the compact trace's line limit."""

    def __init__(self, console: Any, width: int):
        self.console, self.width = console, width

    def print(self, *objects: Any, **kwargs: Any) -> None:
        self.console.print(*objects, width=self.width, **kwargs)
