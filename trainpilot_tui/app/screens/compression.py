"""The compression view: the hardware-aware compression job live — stage, episode, reward, the
best configuration's per-layer sparsity as bars, and every configuration tried as a point of
accuracy against speed-up.

The job runs in a thread worker (`trainpilot.compress.run_compression`); its events become
messages (compress_messages.py) and only the handlers below touch widgets. Leaving the view asks
the job to stop after its current episode.
"""
from __future__ import annotations

import threading
from typing import Any, Callable

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.screen import Screen
from textual.widgets import Footer, Static

from trainpilot.compress import CompressConfig

from .. import compress_messages as cm
from ..widgets.sparsity_bars import LayerBar, SparsityBars
from ..widgets.tradeoff_chart import TradeoffChart

Job = Callable[..., Any]  # run_compression's signature: (config, *, on_event, stop) -> report


def default_job(config: CompressConfig, **kwargs: Any) -> Any:
    from trainpilot.compress import run_compression

    return run_compression(config, **kwargs)


class CompressionScreen(Screen[None]):
    CSS_PATH = "compression.tcss"
    BINDINGS = [Binding("escape", "close", "Close"), Binding("s", "stop", "Stop search")]

    def __init__(self, config: CompressConfig, job: Job = default_job) -> None:
        super().__init__()
        self.config = config
        self.job = job
        self.stop_requested = threading.Event()
        self.report: Any = None
        self.problem: str | None = None
        self.prunable: tuple[Any, ...] = ()

    def compose(self) -> ComposeResult:
        model = self.config.model if isinstance(self.config.model, str) else self.config.model.get("name")
        where = self.config.hardware or "this machine"
        dataset = getattr(self.config.dataset, "source", self.config.dataset) or "demo"  # a path, or a loaded Dataset
        if self.config.job is not None:  # a job (or its file.py:make_job) brings model and data
            model, dataset = getattr(self.config.job, "title", self.config.job), "its own data"
        yield Static(f"[b]Compression[/b] {model} on {dataset} for {where}:"
                     f" >= {self.config.target_speedup:g}x at <= {self.config.max_accuracy_drop:g} pt", id="title")
        yield Static("starting", id="status")
        yield Static("", id="notice")
        with Horizontal(id="panels"):
            yield SparsityBars(id="bars")
            yield TradeoffChart(id="chart")
        yield Static("", id="verdict")
        yield Footer()

    def on_mount(self) -> None:
        chart = self.query_one(TradeoffChart)
        chart.target = self.config.target_speedup
        chart.label = "predicted" if self.config.hardware else "measured"
        self.run_job()

    @work(thread=True, group="compression", exclusive=True, exit_on_error=False)
    def run_job(self) -> None:
        from trainpilot.errors import TrainPilotError

        try:
            self.job(self.config, on_event=lambda e: self.post_message(cm.message_for(e)), stop=self.stop_requested)
        except (TrainPilotError, ValueError, OSError) as exc:
            self.post_message(cm.CompressionFailed(str(exc)))

    # ---------------------------------------------------------------- handlers

    def _status(self, text: str) -> None:
        self.query_one("#status", Static).update(text)

    def on_compression_stage_started(self, message: cm.CompressionStageStarted) -> None:
        self._status(f"[b]{message.event.stage}[/b] {message.event.text}")

    def on_dense_model_trained(self, message: cm.DenseModelTrained) -> None:
        e = message.event
        self.prunable = e.layers
        self.query_one(TradeoffChart).threshold = e.val_accuracy - self.config.max_accuracy_drop / 100.0
        self.query_one(SparsityBars).rows = tuple(LayerBar(l.name, l.kind, l.out_channels, l.out_channels) for l in e.layers)
        self._status(f"[b]dense[/b] validation {e.val_accuracy:.1%}, test {e.test_accuracy:.1%}; {e.threads} thread(s)")

    def on_compression_noticed(self, message: cm.CompressionNoticed) -> None:
        notice = self.query_one("#notice", Static)
        notice.update(f"[b]note[/b]: {message.event.text}")
        notice.add_class("shown")

    def on_speed_aim_measured(self, message: cm.SpeedAimMeasured) -> None:
        self._status(f"[b]aim[/b] {message.event.text()}")

    def on_deployment_speed_measured(self, message: cm.DeploymentSpeedMeasured) -> None:
        self._status(f"[b]measured[/b] {message.event.text()}")

    def on_deployment_tested(self, message: cm.DeploymentTested) -> None:
        e = message.event
        self._status(f"[b]tested[/b] {e.kind}: test {e.accuracy:.1%}, drop {e.drop.text()}")

    def on_compression_episode_evaluated(self, message: cm.CompressionEpisodeEvaluated) -> None:
        e, evaluation = message.event, message.event.evaluation
        chart = self.query_one(TradeoffChart)
        chart.points = (*chart.points, (evaluation.speedup, evaluation.accuracy))
        shown = e.best or evaluation
        chart.best = (shown.speedup, shown.accuracy) if e.best is not None else None
        self.query_one(SparsityBars).title = "best so far, sparsity per layer" if e.best is not None else "sparsity per layer"
        self.query_one(SparsityBars).rows = tuple(LayerBar(l.name, l.kind, l.out_channels, shown.kept.get(l.name, l.out_channels)) for l in self.prunable)
        best = f" | best {e.best.speedup_text()} at {e.best.accuracy:.1%}" if e.best is not None else ""
        self._status(f"[b]episode {e.episode}/{e.episodes}[/b] reward {evaluation.reward.value:+.2f},"
                     f" {evaluation.speedup_text()} {evaluation.cycles}, validation {evaluation.accuracy:.1%}{best}")

    def on_compression_finished(self, message: cm.CompressionFinished) -> None:
        self.report = report = message.event.report
        data = report.to_dict()
        if report.tuned is not None:
            kept = report.tuned.pruned.kept
            self.query_one(SparsityBars).title = "deployed, sparsity per layer" if report.deployed else "best found, sparsity per layer"
            self.query_one(SparsityBars).rows = tuple(LayerBar(l.name, l.kind, l.out_channels, kept[l.name]) for l in report.layers)
        lines = [f"[b]{'deployed' if report.deployed else 'not deployed'}[/b]: {data['reason'].split(': ', 1)[-1]}"]
        if data["speedup_measured"] is not None:
            lines.append(f"measured {data['speedup_measured']:.2f}x [{data['speedup_low']:.2f}, {data['speedup_high']:.2f}]"
                         f" {data['speedup_confidence']:.0%} ({data['step_time_dense_s'] * 1e3:.1f} -> {data['step_time_pruned_s'] * 1e3:.1f} ms),"
                         f" test accuracy {data['accuracy_dense']:.1%} -> {data['accuracy_pruned']:.1%}")
            lines.append(f"drop {data['accuracy_drop']:.2f} pt [{data['accuracy_drop_low']:.2f}, {data['accuracy_drop_high']:.2f}]"
                         f" {data['accuracy_drop_confidence']:.0%}, {data['test_samples_lost']} lost / {data['test_samples_gained']} gained"
                         f" of {data['samples']['test']}; {data['chosen_kind']}, {data['deploy_rule']} rule")
            lines.append("predicted: " + ", ".join(f"{name} {p['speedup']:.2f}x" for name, p in data["predicted"].items()))
        self.query_one("#verdict", Static).update("\n".join(lines))
        self._status(f"[b]done[/b] {len(report.evaluations)} episodes in {report.search_seconds:.0f}s of search")

    def on_compression_failed(self, message: cm.CompressionFailed) -> None:
        self.problem = message.problem
        self.query_one("#verdict", Static).update(f"[b]error[/b]: {message.problem}")
        self._status("[b]stopped[/b]")

    # ---------------------------------------------------------------- keys

    def action_stop(self) -> None:
        self.stop_requested.set()
        self._status("[b]stopping[/b] after the current episode")

    def action_close(self) -> None:
        self.stop_requested.set()  # the worker ends after its episode; nothing is deployed
        self.dismiss(None)
