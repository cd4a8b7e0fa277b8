"""One sparsity configuration, tried for real: prune a copy of the trained dense model, fine-tune
it briefly, measure held-out accuracy and the target's cycles, and score it (`reward`)."""

from __future__ import annotations

import time
from collections.abc import Generator
from dataclasses import dataclass
from typing import Any

from torch import nn

from trainpilot.compress.cycles import StepTimes, measure_steps, predict_steps, step_times, timed_rounds
from trainpilot.compress.finetune import RESTART_LR, Tensors, accuracy, train_steps
from trainpilot.compress.layers import ModelLayers
from trainpilot.compress.prune import PrunedModel, prune
from trainpilot.compress.reward import Reward, compression_reward
from trainpilot.compress.speed_margin import DEFAULT_AIM
from trainpilot.compress.speedup_interval import MIN_ROUNDS
from trainpilot.compress.speedup_repeats import TimingBudget, rounds_until_decided
from trainpilot.compress.target import CompressionTarget


@dataclass(frozen=True)
class Evaluation:
    sparsity: dict[str, float]  # per prunable layer, as removed (channels are whole)
    kept: dict[str, int]
    accuracy: float  # held-out (validation) accuracy after the short fine-tune, in [0, 1]
    speedup: float  # dense cycles / pruned cycles on the target
    step_s: float
    dense_step_s: float
    cycles: str  # "measured" | "predicted"
    params: int
    reward: Reward
    seconds: float  # what trying it cost
    # the speed-up's interval over the timed rounds (speedup_interval.py); None when too few rounds to bound it
    speedup_low: float | None = None
    speedup_high: float | None = None

    def speedup_text(self) -> str:
        """'1.62x [1.49, 1.71]', or '1.62x' without an interval."""
        if self.speedup_low is None or self.speedup_high is None:
            return f"{self.speedup:.2f}x"
        return f"{self.speedup:.2f}x [{self.speedup_low:.2f}, {self.speedup_high:.2f}]"

    def to_dict(self) -> dict[str, Any]:
        return {
            "sparsity": {k: round(v, 4) for k, v in self.sparsity.items()},
            "kept_channels": dict(self.kept),
            "accuracy": self.accuracy,
            "speedup": self.speedup,
            "speedup_low": self.speedup_low,
            "speedup_high": self.speedup_high,
            "speedup_label": self.cycles,
            "step_s": self.step_s,
            "dense_step_s": self.dense_step_s,
            "params": self.params,
            "reward": self.reward.value,
            "accuracy_met": self.reward.accuracy_met,
            "speed_met": self.reward.speed_met,
            "seconds": self.seconds,
        }


@dataclass
class Evaluator:
    dense: nn.Module  # trained
    layers: ModelLayers
    sample_shape: tuple[int, ...]
    num_classes: int
    train: Tensors
    val: Tensors
    target: CompressionTarget
    threshold: float  # validation accuracy to reach, in [0, 1]
    target_speedup: float
    threads: int
    batch: int  # fine-tuning mini-batch
    timing_batch: int  # the batch whose step time counts
    finetune_steps: int
    timing_repeats: int
    seed: int = 0
    round_to: int | None = None
    # a single search figure must clear target x aim to count as fast enough (speed_margin.py measures it)
    aim: float = DEFAULT_AIM
    decision: TimingBudget = TimingBudget()  # what one speed-up decision may spend timing (speedup_repeats.py)

    def __post_init__(self) -> None:
        self._predicted_dense: float | None = None

    def prune(self, sparsity: dict[str, float]) -> PrunedModel:
        return prune(self.dense, self.layers, sparsity, self.sample_shape, round_to=self.round_to)

    def cycles(self, model: nn.Module, repeats: int | None = None) -> StepTimes:
        """Dense and `model` on the target: measured here (interleaved), or predicted."""
        if self.target.is_described:
            return predict_steps(
                {"dense": self.dense, "pruned": model},
                self.sample_shape,
                self.num_classes,
                batch=self.timing_batch,
                machine=self.target.described,
            )
        return self.timed_here({"dense": self.dense, "pruned": model}, repeats or self.timing_repeats)

    def timed_here(self, models: dict[str, nn.Module], repeats: int) -> StepTimes:
        """`models` timed on this machine in `repeats` interleaved rounds at this job's timing batch,
        threads and seed: the one timing setup every speed-up of a compression is read on."""
        return measure_steps(
            models,
            self.sample_shape,
            self.num_classes,
            batch=self.timing_batch,
            threads=self.threads,
            repeats=repeats,
            seed=self.seed,
        )

    def _rounds(self, models: dict[str, nn.Module]) -> Generator[dict[str, float], None, None]:
        """timed_here's rounds, one at a time, for a caller that decides when it has enough."""
        return timed_rounds(
            models, self.sample_shape, self.num_classes, batch=self.timing_batch, threads=self.threads, seed=self.seed
        )

    def decided(self, model: nn.Module, threshold: float) -> StepTimes:
        """Dense and `model` on the target, timed here until the speed-up's interval decides against
        `threshold` (within `decision`); a described machine's prediction is exact at once."""
        if self.target.is_described:
            return self.cycles(model)
        source = self._rounds({"dense": self.dense, "pruned": model})
        rounds = rounds_until_decided(source, threshold, self.decision)
        source.close()
        return step_times(rounds, self.timing_batch, self.threads)

    def __call__(self, sparsity: dict[str, float]) -> Evaluation:
        start = time.perf_counter()
        pruned = self.prune(sparsity)
        train_steps(
            pruned.model,
            self.train,
            steps=self.finetune_steps,
            batch=self.batch,
            lr=RESTART_LR,
            seed=self.seed,
            threads=self.threads,
            teacher=self.dense,
        )
        acc = accuracy(pruned.model, self.val, threads=self.threads)
        times = self.cycles(pruned.model)
        bounded = times.label != "measured" or times.repeats >= MIN_ROUNDS
        interval = times.interval("pruned") if bounded else None
        # the interval's own point (the median paired ratio) when there is one, so the point lies inside it
        speedup = interval.ratio if interval else times.speedup("pruned")
        return Evaluation(
            sparsity=pruned.sparsity,
            kept=pruned.kept,
            accuracy=acc,
            speedup=speedup,
            step_s=times.seconds["pruned"],
            dense_step_s=times.seconds["dense"],
            cycles=times.label,
            params=pruned.params,
            reward=compression_reward(acc, self.threshold, speedup, self.target_speedup * self.aim),
            seconds=time.perf_counter() - start,
            speedup_low=interval.low if interval else None,
            speedup_high=interval.high if interval else None,
        )
