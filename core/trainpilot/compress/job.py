"""A compression job from start to finish: what `trainpilot headless compress` and the TUI's
compression view run.

    plan      the target (configuration determiner) and the agent's thread plan for the dense model
    train     the dense model, from scratch, on the training split
    aim       the dense model timed against itself: this machine's timing noise, which every
              single speed-up figure must clear on top of the target (speed_margin.py)
    search    TD3 episodes over the gymnasium env: each one a real prune, short fine-tune, held-out
              accuracy (validation split) and cycles
    deploy    the search's finalists re-measured, given back the channels the target does not charge
              for (grow.py), joined by uniform and L1 pruning at the target speed (baselines.py),
              and each given the deployment fine-tune, the one with the lowest loss on the
              validation split chosen (finalists.py), tested on the test split (never seen by the
              search or the choice) with the drop's paired interval (drop_interval.py),
              re-measured interleaved with the dense model until the speed-up's interval decides
              against the target (speedup_repeats.py), exported only when both thresholds hold by
              the deployment rule (deploy.DEPLOY_RULES); otherwise saved beside, with the reason

Before the search, a test split too small to resolve the allowed drop is said in one line
(drop_interval.resolution), and the job goes on.

Progress goes to `on_event` (events.py) from the calling thread; `stop` (a threading.Event set by
another thread) ends the search after the current episode.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import torch

from trainpilot.compress import events as ev
from trainpilot.compress.baselines import at_target
from trainpilot.compress.budget import Budget, budget_for
from trainpilot.compress.cycles import StepTimes
from trainpilot.compress.deploy import (
    DEPLOY_RULES,
    Tuned,
    Verdict,
    coremltools_installed,
    deployment_fine_tune,
    export,
    judge,
    plan_document,
    predicted_on,
    tested,
)
from trainpilot.compress.drop_interval import DropInterval, Resolution, paired_drop, resolution
from trainpilot.compress.env import DEFAULT_MAX_SPARSITY, CompressionEnv
from trainpilot.compress.evaluate import Evaluation, Evaluator
from trainpilot.compress.finalists import Finalist, choose
from trainpilot.compress.finetune import LEARNING_RATE, accuracy, right, tensors, train_steps
from trainpilot.compress.layers import LayerInfo
from trainpilot.compress.search import best, run_search
from trainpilot.compress.speed_margin import SpeedAim, measure_aim
from trainpilot.compress.speedup_interval import MIN_ROUNDS
from trainpilot.compress.speedup_repeats import TimingBudget
from trainpilot.compress.target import CompressionTarget, resolve_compression_target
from trainpilot.errors import DatasetError

# the best model found when it is not deployed goes beside the deployment's directory, never into it
NOT_DEPLOYED_SUFFIX = "-not-deployed"
MIN_HELD_OUT = 20  # samples in each of the validation and test splits; fewer make accuracy a coin toss
VAL_FRACTION = 0.15  # the search's reward reads this split
TEST_FRACTION = 0.15  # the reported accuracy: never seen by the search
# Described machines every report predicts the speed-up on: an Apple Silicon and a CUDA machine, neither at hand.
DEFAULT_PREDICT_ON = ("apple-m2", "linux-cuda-rtx4090")


@dataclass(frozen=True)
class CompressConfig:
    model: Any = "small_cnn"  # a zoo name, {"name", "layers", "width"}, or path.py:ClassName
    dataset: Any = None  # a path, None for the demo set, or a loaded data.Dataset
    target_speedup: float = 1.5
    max_accuracy_drop: float = 1.0  # points
    hardware: str | None = None  # None: this machine (measured); else a profile name or .toml (predicted)
    episodes: int = 24  # at least; more while search_seconds last (search.MAX_EPISODES_FACTOR)
    search_seconds: float = 45.0  # may search on past `episodes` (a cheap model's 24 are quick: docs/compression.md)
    seed: int = 0
    threads: int | None = None  # None: the agent's thread plan
    batch_size: int = 64
    timing_batch: int | None = None  # the batch whose step time counts (default batch_size)
    # None: budget.py's rule, 48 epochs but at least 2400 steps (a dense model short of convergence flatters
    # the pruned one)
    dense_epochs: float | None = None
    finetune_steps: int = 100  # per search episode (finetune.RESTART_LR: why 100)
    deploy_epochs: float | None = None  # None: half the dense model's steps, as a warm restart (finetune.RESTART_LR)
    search_repeats: int = 6  # rounds per episode: the fewest that bound a speed-up at 95 % (speedup_interval.py)
    deploy_repeats: int = 21  # rounds a deployment decision starts with (re-measuring, growth, the deployed model)
    timing_seconds: float = 5.0  # what one deployment decision may spend adding rounds until its interval decides
    max_timing_rounds: int = 201
    finalists: int = (
        3  # at least this many configurations get the deployment fine-tune, compared on validation (finalists.py)
    )
    free_channels: bool = True  # each finalist first takes back the channels its target does not charge for (grow.py)
    baseline_finalists: bool = True  # uniform and L1 pruning at the target speed are finalists too (finalists.py)
    deploy_rule: str = "point"  # deploy.DEPLOY_RULES: the measured drop within the limit, or its interval's upper end
    max_sparsity: float = DEFAULT_MAX_SPARSITY
    out: str | None = None  # export directory (default: the data directory's compressed/)
    export: bool = True
    predict_on: tuple[str, ...] = DEFAULT_PREDICT_ON
    # the user's own trainpilot.Job (or `file.py:make_job`) instead of `model` on `dataset`: a
    # classifier with metric="accuracy" (user_job.py says what compression takes from it)
    job: Any = None

    def problems(self) -> list[str]:
        """What is impossible about this request (each a usage error)."""
        out = []
        if not self.target_speedup > 1.0:
            out.append(
                "--target-speedup must be above 1 (a compressed model that is not faster is no target),"
                f" got {self.target_speedup:g}"
            )
        if not self.max_accuracy_drop >= 0.0:
            out.append(f"--max-accuracy-drop must be 0 or more points, got {self.max_accuracy_drop:g}")
        if self.deploy_rule not in DEPLOY_RULES:
            out.append(f"--deploy-rule must be one of {', '.join(DEPLOY_RULES)}, got {self.deploy_rule!r}")
        elif self.deploy_rule == "confident" and self.max_accuracy_drop == 0.0:
            out.append(
                "--deploy-rule confident needs --max-accuracy-drop above 0: no interval on a finite test split"
                " has its upper end at 0 points"
            )
        if not self.search_seconds >= 0.0:
            out.append(f"--search-seconds must be 0 or more, got {self.search_seconds:g}")
        if self.episodes < 1:
            out.append(f"--episodes must be at least 1, got {self.episodes}")
        if self.threads is not None and self.threads < 1:
            out.append("--threads must be at least 1")
        if self.batch_size < 1 or (self.timing_batch is not None and self.timing_batch < 1):
            out.append("--batch-size must be at least 1")
        if self.deploy_repeats < MIN_ROUNDS or self.max_timing_rounds < self.deploy_repeats:
            out.append(
                f"--deploy-repeats must be at least {MIN_ROUNDS} (the fewest rounds that bound a speed-up at 95 %)"
                f" and at most the timing rounds allowed ({self.max_timing_rounds}), got {self.deploy_repeats}"
            )
        if self.search_repeats < 1:
            out.append(f"--search-repeats must be at least 1, got {self.search_repeats}")
        if not self.timing_seconds >= 0.0:
            out.append(f"--timing-seconds must be 0 or more, got {self.timing_seconds:g}")
        if self.finalists < 1:
            out.append(f"--finalists must be at least 1, got {self.finalists}")
        if self.finetune_steps < 1 or not all(e is None or e > 0 for e in (self.dense_epochs, self.deploy_epochs)):
            out.append("--finetune-steps, --deploy-epochs and --dense-epochs must be positive")
        if not 0.0 < self.max_sparsity < 1.0:
            out.append(f"--max-sparsity must be between 0 and 1, got {self.max_sparsity:g}")
        return out


@dataclass
class CompressionReport:
    config: CompressConfig
    target: CompressionTarget
    model_name: str
    dataset: str
    samples: dict[str, int]
    threads: int
    threads_reason: str
    layers: tuple[LayerInfo, ...]
    dense_val_accuracy: float
    dense_accuracy: float  # test
    budget: Budget
    evaluations: list[Evaluation]
    search_seconds: float
    chosen: Evaluation | None  # the search's configuration deployed (None: a baseline was, or nothing)
    finalists: list[Finalist]
    tuned: Tuned | None
    measured: StepTimes | None  # dense vs deployed, this machine, interleaved
    target_times: StepTimes | None  # the target's cycles (== measured for this machine)
    predicted: dict[str, StepTimes]
    verdict: Verdict
    params_dense: int
    total_seconds: float
    notes: list[str] = field(default_factory=list)
    chosen_kind: str | None = None  # "agent" | "uniform" | "l1-global": which kind of finalist was deployed
    resolution: Resolution | None = None  # can the test split resolve the allowed drop (None: a limit of 0)
    aim: SpeedAim | None = None  # how far past the target the search aimed (None: stopped before it was measured)
    dense_model: Any = None  # kept for baselines and benchmarks; not in to_dict
    evaluator: Any = None
    test_data: Any = None  # finetune.Tensors of the test split
    dense_right: Any = None  # which test samples the dense model classifies right (a bool tensor)

    @property
    def deployed(self) -> bool:
        return self.verdict.deployed

    def drop_of(self, tuned: Tuned) -> DropInterval:
        """`tuned`'s accuracy drop from the dense model, with its paired interval (same test samples)."""
        assert tuned.right is not None, "scored with deploy.tested"
        return paired_drop(self.dense_right, tuned.right)

    def to_dict(self) -> dict[str, Any]:
        sparsity = self.tuned.pruned.sparsity if self.tuned else {}
        kept = self.tuned.pruned.kept if self.tuned else {}
        m = self.measured
        measured_speed = m.interval("pruned") if m else None
        drop = self.verdict.interval
        return {
            "model": self.model_name,
            "dataset": self.dataset,
            "samples": self.samples,
            "target": self.target.to_dict(),
            "threads": self.threads,
            "threads_reason": self.threads_reason,
            "timing_batch": m.batch if m else None,
            "layers": [
                {
                    **layer.to_dict(),
                    "sparsity": round(sparsity.get(layer.name, 0.0), 4),
                    "kept_channels": kept.get(layer.name, layer.out_channels),
                }
                for layer in self.layers
            ],
            "step_time_dense_s": m.seconds["dense"] if m else None,
            "step_time_pruned_s": m.seconds["pruned"] if m else None,
            "step_time_label": "measured",
            # the median of the paired rounds' ratios and its interval (speedup_interval.py)
            "speedup_measured": measured_speed.ratio if measured_speed else None,
            "speedup_low": measured_speed.low if measured_speed else None,
            "speedup_high": measured_speed.high if measured_speed else None,
            "speedup_confidence": measured_speed.confidence if measured_speed else None,
            "speedup_rounds": measured_speed.rounds if measured_speed else None,
            # how sure the target's speed-up is at least the target (the one-sided level, as for the drop)
            "speedup_clears_target": (
                self.verdict.speed.sure_above(self.config.target_speedup) if self.verdict.speed else None
            ),
            "speed_aim": self.aim.to_dict() if self.aim else None,
            "speedup_target": self.verdict.speedup,
            "speedup_target_label": self.verdict.speedup_label,
            "accuracy_dense": self.dense_accuracy,
            "accuracy_pruned": self.tuned.accuracy if self.tuned else None,
            "accuracy_drop": self.verdict.accuracy_drop,
            "accuracy_drop_low": drop.low if drop else None,
            "accuracy_drop_high": drop.high if drop else None,
            "accuracy_drop_confidence": drop.confidence if drop else None,
            # how sure the drop is within max_accuracy_drop (the one-sided level whose upper end is the limit)
            "accuracy_drop_within_limit": drop.within(self.config.max_accuracy_drop) if drop else None,
            "test_samples_lost": drop.lost if drop else None,
            "test_samples_gained": drop.gained if drop else None,
            "accuracy_split": "test",
            "resolution": self.resolution.to_dict() if self.resolution else None,
            "params_dense": self.params_dense,
            "params_pruned": self.tuned.pruned.params if self.tuned else None,
            "training": self.budget.to_dict(),
            "predicted": {
                name: {
                    "dense_step_s": t.seconds["dense"],
                    "pruned_step_s": t.seconds["pruned"],
                    "speedup": t.speedup("pruned"),
                    "label": t.label,
                    "where": t.where,
                }
                for name, t in self.predicted.items()
            },
            "target_speedup": self.config.target_speedup,
            "max_accuracy_drop": self.config.max_accuracy_drop,
            "deploy_rule": self.verdict.rule,
            "deployed": self.verdict.deployed,
            "chosen_kind": self.chosen_kind,
            "reason": self.verdict.reason,
            "exported": self.verdict.exported,
            "saved_not_deployed": self.verdict.saved,
            "search": {
                "episodes": len(self.evaluations),
                "seconds": self.search_seconds,
                "chosen_episode": (self.evaluations.index(self.chosen) + 1)
                if self.chosen in self.evaluations
                else None,
                "evaluations": [e.to_dict() for e in self.evaluations],
                "finalists": [f.to_dict() for f in self.finalists],
            },
            "total_seconds": self.total_seconds,
            "notes": list(self.notes),
        }


def split_three(data: Any, seed: int) -> tuple[Any, Any, Any]:
    """(train, validation, test), or a DatasetError when the held-out splits would be too small."""
    rest, test = data.split(TEST_FRACTION, seed)
    train, val = rest.split(VAL_FRACTION / (1.0 - TEST_FRACTION), seed + 1)
    if min(len(val), len(test)) < MIN_HELD_OUT or len(train) < MIN_HELD_OUT:
        need = int(MIN_HELD_OUT / min(VAL_FRACTION, TEST_FRACTION)) + 1
        raise DatasetError(
            f"too small to hold out: {len(data)} samples give {len(val)} validation and {len(test)} test samples;"
            f" compression needs at least {MIN_HELD_OUT} in each (about {need} samples in all)",
            data.source,
        )
    return train, val, test


def train_dense(model: Any, train: Any, *, steps: int, batch: int, seed: int, threads: int) -> None:
    """Train the dense model the job compresses, from scratch, in place, for `steps` steps
    (budget.py): the recipe every dense model here gets, benchmarks/compress_resolution.py's too."""
    train_steps(model, train, steps=steps, batch=batch, lr=LEARNING_RATE, seed=seed, threads=threads)


def plan_threads(model: Any, data: Any, batch: int, *, job: Any = None) -> tuple[int, str]:
    """The CPU thread count the agent plans for training the dense model here (its cost model; the
    rule cascade on a machine not calibrated yet), and the reason. `job`: a trainpilot.Job planned
    instead of `model` on `data`."""
    from trainpilot.agent.planning import plan_job

    report = plan_job(model, data, epochs=1, batch_size=batch, job=job, memory_format="contiguous")
    chosen = report["chosen"]
    if chosen.get("backend") == "cpu" and chosen.get("threads"):
        return int(
            chosen["threads"]
        ), f"the agent's plan: {chosen['label']} ({chosen['policy']}, confidence {chosen['confidence']:.2f})"
    import os

    threads = os.cpu_count() or 1
    return threads, f"the agent chose {chosen.get('label')}; the CPU timing uses all {threads} threads"


def run_compression(
    config: CompressConfig, *, on_event: Callable[[Any], None] | None = None, stop: threading.Event | None = None
) -> CompressionReport:
    """Run the whole job. Raises ValueError for an impossible request, TrainPilotError (one line)
    for bad input (unknown hardware, a dataset too small to hold out, a model torch-pruning cannot
    handle); otherwise returns the report, deployed or not."""
    from trainpilot.compress.prune import check_prunable
    from trainpilot.machine.allocator import keep_freed_memory

    say = on_event or (lambda _e: None)
    problems = config.problems()
    if problems:
        raise ValueError(problems[0])
    # the dense model trains, and every configuration is timed, as a TrainPilot run would train them
    keep_freed_memory()
    started = time.perf_counter()
    target = resolve_compression_target(config.hardware)
    machines = _machines(config, target)
    what = _what_to_compress(config)
    data, shape, classes = what.data, what.data.sample_shape, what.num_classes
    train_set, val_set, test_set = split_three(data, config.seed)
    torch.manual_seed(config.seed)
    dense = what.make_model()
    layers = check_prunable(dense, shape)
    timing_batch = config.timing_batch or config.batch_size
    notes = list(what.notes)

    say(ev.StageStarted("plan", f"target: {target.name} (cycles {target.cycles_label}); planning threads"))
    if config.threads:
        threads, why = config.threads, "--threads"
    else:
        threads, why = what.plan_threads(timing_batch)
    train, val, test = tensors(train_set), tensors(val_set), tensors(test_set)
    resolved = resolution(len(test), config.max_accuracy_drop)
    if resolved is not None and not resolved.resolved:
        notes.append(resolved.warning())
        say(ev.Notice(notes[-1]))
    budget = budget_for(
        len(train), config.batch_size, dense_epochs=config.dense_epochs, deploy_epochs=config.deploy_epochs
    )

    say(
        ev.StageStarted(
            "train",
            f"training dense {what.name} for {budget.dense_steps} steps ({budget.why}) on {len(train)} samples"
            f" ({threads} thread(s))",
        )
    )
    t0 = time.perf_counter()
    train_dense(dense, train, steps=budget.dense_steps, batch=config.batch_size, seed=config.seed, threads=threads)
    dense_right = right(dense, test, threads=threads)
    dense_val, dense_test = accuracy(dense, val, threads=threads), int(dense_right.sum()) / len(test)
    say(ev.DenseTrained(dense_val, dense_test, time.perf_counter() - t0, threads, why, layers.prunable))

    evaluator = Evaluator(
        dense=dense,
        layers=layers,
        sample_shape=shape,
        num_classes=classes,
        train=train,
        val=val,
        target=target,
        threshold=dense_val - config.max_accuracy_drop / 100.0,
        target_speedup=config.target_speedup,
        threads=threads,
        batch=config.batch_size,
        timing_batch=timing_batch,
        finetune_steps=config.finetune_steps,
        timing_repeats=config.search_repeats,
        seed=config.seed,
        decision=TimingBudget(config.deploy_repeats, config.max_timing_rounds, config.timing_seconds),
    )
    aim = measure_aim(evaluator, config.deploy_repeats)
    evaluator.aim = aim.aim
    say(ev.AimMeasured(aim, config.target_speedup))
    tried: list[Evaluation] = []

    def episode_done(i: int, evaluation: Evaluation) -> None:
        tried.append(evaluation)
        say(ev.EpisodeEvaluated(i, max(i, config.episodes), evaluation, best(tried, config.target_speedup, aim.aim)))

    env = CompressionEnv(layers, evaluator, max_sparsity=config.max_sparsity, on_episode=episode_done)
    say(ev.StageStarted("search", f"searching {config.episodes} episode(s) of {env.n_layers} layer(s) each (TD3)"))
    t0 = time.perf_counter()
    evaluations = run_search(env, config.episodes, seed=config.seed, stop=stop, budget_s=config.search_seconds)
    search_seconds = time.perf_counter() - t0
    chosen = best(evaluations, config.target_speedup, aim.aim)
    if len(evaluations) < config.episodes:
        notes.append(f"{len(evaluations)} of {config.episodes} episodes ran: stopped on request")

    tuned = measured = target_times = None
    finalists: list[Finalist] = []
    predicted: dict[str, StepTimes] = {}
    chosen_kind: str | None = None
    if chosen is None or (stop is not None and stop.is_set()):
        verdict = Verdict(
            False,
            "not deployed: the search was stopped before it finished",
            0.0,
            0.0,
            target.cycles_label,
            rule=config.deploy_rule,
        )
    else:

        def tune(pruned: Any) -> Any:
            return deployment_fine_tune(
                pruned,
                train,
                steps=budget.deploy_steps,
                batch=config.batch_size,
                seed=config.seed,
                threads=threads,
                teacher=dense,
            )

        free = ", giving back free channels" if config.free_channels else ""
        say(
            ev.StageStarted(
                "deploy",
                f"re-measuring the best configurations{free}; fine-tuning at least {config.finalists},"
                f" {budget.deploy_steps} steps ({budget.epochs(budget.deploy_steps):.0f} epochs) each;"
                " choosing on validation",
            )
        )
        baselines = _baselines_at_target(config, evaluator, notes, say) if config.baseline_finalists else []
        final, finalists = choose(
            evaluations,
            count=config.finalists,
            target_speedup=config.target_speedup,
            evaluator=evaluator,
            tune=tune,
            repeats=config.deploy_repeats,
            budget_s=search_seconds,
            free_channels=config.free_channels,
            baselines=baselines,
        )
        if final is not None:
            chosen, pruned, chosen_kind = final.evaluation, final.pruned, final.kind
            assert pruned is not None  # choose() picks among the fine-tuned finalists
        else:  # nothing was fast enough in the search: its most rewarded configuration, for the verdict to judge
            pruned, chosen_kind = tune(evaluator.prune(chosen.sparsity)), "agent"
        say(ev.StageStarted("deploy", f"deploying {_deployed_text(final, chosen, evaluations)}, re-measuring"))
        # the test split, read once, after every choice
        tuned = tested(pruned, test, threads=threads)
        assert tuned.right is not None  # deploy.tested scores every test sample
        drop = paired_drop(dense_right, tuned.right)
        say(ev.Tested(chosen_kind, tuned.accuracy, drop))
        # the deployed model against the dense one, on this machine: until the interval decides against the target
        if target.is_described:
            measured = evaluator.timed_here({"dense": dense, "pruned": tuned.pruned.model}, config.deploy_repeats)
        else:
            measured = evaluator.decided(tuned.pruned.model, config.target_speedup)
        measured_speed = measured.interval("pruned")
        predicted = predicted_on(machines, dense, tuned.pruned.model, shape, classes, timing_batch)
        target_times = predicted[config.hardware] if target.is_described and config.hardware else measured
        speed = target_times.interval("pruned")
        say(ev.SpeedMeasured(chosen_kind, speed, config.target_speedup))
        verdict = judge(
            drop,
            speed,
            max_drop=config.max_accuracy_drop,
            target_speedup=config.target_speedup,
            rule=config.deploy_rule,
        )
        if config.export:
            mlpackage = verdict.deployed and target.is_apple and coremltools_installed()
            if verdict.deployed and target.is_apple and not mlpackage:
                notes.append("no .mlpackage: coremltools is not installed (pip install 'train-pilot[coreml]')")
            figures = {
                "accuracy_dense": dense_test,
                "accuracy_pruned": tuned.accuracy,
                **drop.to_dict(),
                "deploy_rule": config.deploy_rule,
                "chosen_kind": chosen_kind,
                **{k.replace("speedup", "speedup_measured", 1): v for k, v in measured_speed.to_dict().items()},
                "deployed": verdict.deployed,
                "reason": verdict.reason,
                "step_time_dense_s": measured.seconds["dense"],
                "step_time_pruned_s": measured.seconds["pruned"],
                "target": target.to_dict(),
                "threads": threads,
                "timing_batch": timing_batch,
            }
            document = plan_document(what.model_document, shape, classes, tuned, figures)
            out = config.out or _default_out(what.name)
            if verdict.deployed:
                say(ev.StageStarted("export", "exporting the deployed model"))
                verdict = replace(verdict, exported=export(out, tuned, document, shape, mlpackage=mlpackage))
            else:  # the target was not met, but the user still gets the best model found, beside the deployment's place
                saved = export(out + NOT_DEPLOYED_SUFFIX, tuned, document, shape, mlpackage=False)
                where = Path(saved["plan"]).parent
                why = f"{verdict.reason}; the best model found is saved in {where}"
                verdict = replace(verdict, saved=saved, reason=why)
    report = CompressionReport(
        config=config,
        target=target,
        model_name=what.name,
        dataset=data.source,
        samples={"train": len(train), "validation": len(val), "test": len(test)},
        threads=threads,
        threads_reason=why,
        layers=layers.prunable,
        dense_val_accuracy=dense_val,
        dense_accuracy=dense_test,
        budget=budget,
        evaluations=evaluations,
        search_seconds=search_seconds,
        chosen=chosen,
        finalists=finalists,
        tuned=tuned,
        measured=measured,
        target_times=target_times,
        predicted=predicted,
        verdict=verdict,
        params_dense=layers.total_params,
        total_seconds=time.perf_counter() - started,
        notes=notes,
        chosen_kind=chosen_kind,
        resolution=resolved,
        aim=aim,
        dense_model=dense,
        evaluator=evaluator,
        test_data=test,
        dense_right=dense_right,
    )
    say(ev.CompressionFinished(report))
    return report


BASELINE_KINDS = ("uniform", "l1-global")


def _baselines_at_target(
    config: CompressConfig, evaluator: Evaluator, notes: list[str], say: Callable[[Any], None]
) -> list[Finalist]:
    """Uniform and L1 pruning at the target speed (a timing at the target x the aim, then an interval
    whose lower end clears the target, as every finalist must), each a finalist not yet fine-tuned; a
    kind that cannot get that fast here is left out, with a note."""
    aimed = config.target_speedup * evaluator.aim
    say(ev.StageStarted("deploy", f"finding uniform and L1 pruning at {aimed:.2f}x (bisection on their ratio)"))
    out = []
    for kind in BASELINE_KINDS:
        found = at_target(kind, evaluator, config.target_speedup, repeats=config.deploy_repeats)
        if found is None:
            notes.append(
                f"{kind} pruning does not reach {aimed:.2f}x here, with its interval above {config.target_speedup:g}x,"
                " even at the most pruning allowed"
            )
            continue
        model, interval = found
        out.append(Finalist(None, interval.ratio, pruned=model, kind=kind, interval=interval))
    return out


def _deployed_text(final: Finalist | None, chosen: Evaluation | None, evaluations: list[Evaluation]) -> str:
    kept = "/".join(map(str, final.kept.values())) if final is not None else ""
    if final is not None and final.evaluation is None:
        return f"{final.kind} pruning at the target speed ({kept} channels; lowest validation loss)"
    grown = f" grown to {kept} channels" if final is not None and final.grown else ""
    assert chosen is not None  # the search's configuration, chosen or its most rewarded
    return f"episode {evaluations.index(chosen) + 1}'s configuration{grown}"


@dataclass(frozen=True)
class _Subject:
    """What a compression job compresses: a zoo model (or path.py:Class) on a dataset, or a user's Job."""

    name: str
    data: Any  # the whole data set: split_three splits it
    num_classes: int
    make_model: Callable[[], Any]  # the dense model, built fresh (seeded by the caller)
    model_document: Any  # what plan.json records as the model (deploy.load_exported rebuilds from it)
    plan_threads: Callable[[int], tuple[int, str]]
    notes: tuple[str, ...] = ()


def _what_to_compress(config: CompressConfig) -> _Subject:
    if config.job is not None:
        from trainpilot.compress.user_job import compressible_job
        from trainpilot.job.spec import Job

        own = compressible_job(config.job)

        def job_threads(batch: int) -> tuple[int, str]:
            # planned on what compression trains: the job's model on its data in memory
            in_memory = Job(
                own.make_model, (own.data.X, own.data.y), metric="accuracy", batch_size=batch, name=own.name
            )
            return plan_threads(None, None, batch, job=in_memory)

        return _Subject(own.name, own.data, own.num_classes, own.make_model, own.model_document, job_threads, own.notes)
    from trainpilot.job.data import Dataset, resolve_dataset
    from trainpilot.job.models import ModelSpec, build_model

    data = config.dataset if isinstance(config.dataset, Dataset) else resolve_dataset(config.dataset)
    spec = ModelSpec.from_config(config.model)
    return _Subject(
        spec.name,
        data,
        data.num_classes,
        lambda: build_model(spec, data.sample_shape, data.num_classes),
        spec.to_config(),
        lambda batch: plan_threads(spec.to_config(), data, batch),
    )


def _machines(config: CompressConfig, target: CompressionTarget) -> dict[str, Any]:
    """The described machines to predict on: the --hardware one first, then the default pair."""
    from trainpilot.machine.target_profiles import resolve_target

    out: dict[str, Any] = {}
    if target.is_described and config.hardware is not None:
        out[config.hardware] = target.described
    for name in config.predict_on:
        if name not in out:
            out[name] = resolve_target(name)
    return out


def _default_out(model_name: str) -> str:
    from trainpilot.paths import data_home

    stamp = time.strftime("%Y%m%d-%H%M%S")
    safe = model_name.split(":")[-1].replace("/", "_")
    return str(data_home() / "compressed" / f"{safe}-{stamp}-{threading.get_ident() % 10000:04d}")
