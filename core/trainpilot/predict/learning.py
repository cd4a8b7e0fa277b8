"""Learning from the run history: warm corrections and the model's measured error.

Correction (StarPU-style, generalised): for every past run on this machine, the log ratio of the
actual time to what the calibrated roofline says *now* for that run (same plan, load, epochs). A
new prediction is the roofline times exp(weighted mean of those log ratios), weighted by how
similar each run is to the one being predicted:

    weight = plan match x load-state match x workload similarity (x 8 for the same footprint)

so the same workload on the same plan and load (StarPU's per-footprint history) dominates as soon
as it exists, and otherwise runs of the same layer kind and a similar size on the same plan speak.
A prior weight pulls the mean towards 0 (the roofline itself) while evidence is thin.

Measured error: the weighted RMS of log(actual / predicted) of the predictions TrainPilot made
before past runs of a similar kind, with the calibration's own fit residual as a prior. It falls
as predictions improve, and feeds the confidence.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from trainpilot.plans import Plan
from trainpilot.predict.calibration import Calibration
from trainpilot.predict.features import WorkFeatures, features_of, settings_ratios
from trainpilot.predict.history import RunRecord
from trainpilot.predict.roofline import estimate
from trainpilot.predict.roofline_terms import LOAD_FULL_CORES, LOAD_NOISE_CORES, smooth_step

EXACT_BONUS = 8.0  # the same footprint counts as eight similar runs
PRIOR_WEIGHT = 0.35  # pseudo-runs at ratio 1 (the roofline) that evidence has to outweigh
ERROR_PRIOR_RUNS = 3.0  # pseudo-runs at the prior error
COLD_ERROR_FACTOR = 2.5  # cold errors measured here run a few times the calibration fit residual (docs/measurements.md)
MIN_ERROR = 0.03  # timing noise floor on a shared machine: never claim to be better than this
LEARN_STATUSES = ("success", "interrupted", "phase")  # phase: a load phase of a run the closed loop moved
HUBER_SCALE = 0.15  # log-ratio distance (~16 %) beyond which a past run counts less and less


@dataclass(frozen=True)
class Observation:
    """One past run, reduced to what the correction needs (computed once per model load)."""

    record: RunRecord
    features: WorkFeatures
    busy_weight: float
    log_ratio: float  # ln(actual / roofline now)
    log_error: float | None  # ln(actual / predicted then)
    shape: Shape  # what similarity compares, computed once


@dataclass(frozen=True)
class Shape:
    """The few numbers `similarity` compares, precomputed: thinking time is mostly this comparison."""

    kind: str
    log_flops: float
    log_batch: float
    layers: int

    @classmethod
    def of(cls, f: WorkFeatures) -> Shape:
        return cls(f.dominant_kind, math.log(max(f.total_flops, 1.0)), math.log(max(f.batch_size, 1)), f.layers)


@dataclass(frozen=True)
class Correction:
    log_factor: float  # add to ln(roofline)
    weight: float  # evidence behind it (in runs)
    exact_runs: int  # runs of this very footprint on this plan and load state
    similar_runs: int  # other runs that contributed noticeably

    @property
    def factor(self) -> float:
        return math.exp(self.log_factor)

    @property
    def spoke(self) -> bool:
        return self.weight >= 0.5


def state_weight(busy_cores: float) -> float:
    """0 for an idle machine, 1 with a core busy (what `roofline.load_weights` blends with)."""
    return smooth_step(busy_cores, LOAD_NOISE_CORES, LOAD_FULL_CORES)


def probe_consensus(records: Iterable[RunRecord]) -> dict[str, dict[str, Any]]:
    """Per workload footprint, the median of its runs' step probes (job/step_probe.py): the eager
    step's, and each layout or precision's ratio per thread count. Each run probes its job anew,
    and a probe is a short timing on a noisy machine: learning from every run against its own
    probe, and predicting the next with yet another, would carry each probe's noise into warm
    predictions. One consensus per workload keeps the roofline they share fixed."""
    import statistics

    seen: dict[str, dict[str, list[float]]] = {}
    settings: dict[str, dict[tuple[str, int], list[float]]] = {}
    for rec in records:
        if not rec.learn:
            # only the runs learnt from agree (a row is learn = 0 until its run ends well): a run on
            # ranks probed its step on one rank's cores (run/learning.py), not on the machine's
            continue
        extra = rec.profile.get("extra") if isinstance(rec.profile, dict) else None
        if not isinstance(extra, dict):
            continue
        for key, by_threads in settings_ratios(extra.get("settings_probe")).items():
            for threads, ratio in by_threads.items():
                settings.setdefault(rec.footprint, {}).setdefault((key, threads), []).append(ratio)
        if not extra.get("probe_step_s"):
            continue
        into = seen.setdefault(rec.footprint, {"probe_step_s": [], "probe_all_s": [], "probe_threads": []})
        into["probe_step_s"].append(float(extra["probe_step_s"]))
        if extra.get("probe_all_s") and extra.get("probe_threads"):
            into["probe_all_s"].append(float(extra["probe_all_s"]))
            into["probe_threads"].append(float(extra["probe_threads"]))
    out: dict[str, dict[str, Any]] = {}
    for footprint, values in seen.items():
        agreed: dict[str, Any] = {
            "probe_step_s": statistics.median(values["probe_step_s"]),
            "probe_all_s": 0.0,
            "probe_threads": 0,
        }
        if values["probe_all_s"]:
            agreed["probe_all_s"] = statistics.median(values["probe_all_s"])
            agreed["probe_threads"] = int(statistics.mode(values["probe_threads"]))
        out[footprint] = agreed
    for footprint, ratios in settings.items():
        medians: dict[str, dict[int, float]] = {}
        for (key, threads), samples in ratios.items():
            medians.setdefault(key, {})[threads] = statistics.median(samples)
        out.setdefault(footprint, {})["settings_ratios"] = medians
    return out


def agreed_probes(observations: Iterable[Observation], footprint: str) -> dict[str, Any] | None:
    """The probes a workload's learnt runs were learnt with (None: no run of it, or none probed)."""
    past = next((o for o in observations if o.record.footprint == footprint), None)
    if past is None:
        return None
    f = past.features
    agreed: dict[str, Any] = {"settings_ratios": f.settings_ratios} if f.settings_ratios else {}
    if f.probe_step_s > 0:
        agreed.update(probe_step_s=f.probe_step_s, probe_all_s=f.probe_all_s, probe_threads=float(f.probe_threads))
    return agreed or None


def with_probes(feats: WorkFeatures, agreed: dict[str, Any] | None) -> WorkFeatures:
    """`feats` with its workload's agreed probes (probe_consensus), where it has them."""
    from dataclasses import replace

    if not agreed:
        return feats
    if feats.probe_step_s > 0 and agreed.get("probe_step_s"):
        feats = replace(
            feats,
            probe_step_s=agreed["probe_step_s"],
            probe_all_s=agreed["probe_all_s"],
            probe_threads=int(agreed["probe_threads"]),
        )
    if feats.settings_ratios and agreed.get("settings_ratios"):
        # the agreed ratio where the workload has one, this run's own for a variant it does not
        merged = {k: {**v, **agreed["settings_ratios"].get(k, {})} for k, v in feats.settings_ratios.items()}
        feats = replace(feats, settings_ratios=merged)
    return feats


def observe(
    records: Iterable[RunRecord], calibration: Calibration, agreed: dict[str, dict[str, Any]] | None = None
) -> list[Observation]:
    """The records as observations; `agreed`: the probes per footprint to learn them with (default:
    their own consensus; a run added to a loaded history takes the history's)."""
    records = list(records)
    agreed = {**probe_consensus(records), **(agreed or {})}
    out = []
    for rec in records:
        # Only runs that ended and timed one plan: a running or crashed run has no actual time yet,
        # and a run that changed plans mid-way timed two at once (its row says learn = 0).
        if rec.status not in LEARN_STATUSES or not rec.learn or rec.epochs_done < 1 or rec.actual_s <= 0:
            continue
        feats = with_probes(features_of(rec.profile, epochs=rec.epochs_done), agreed.get(rec.footprint))
        roof = estimate(feats, rec.plan, rec.busy_cores, calibration)
        if roof is None or roof.run_s <= 0:
            continue
        log_error = None
        if rec.predicted_s and rec.predicted_s > 0:
            # the prediction was for the planned epochs; scale it to the epochs actually done
            scaled = rec.predicted_s * rec.epochs_done / max(rec.epochs, 1)
            log_error = math.log(rec.actual_s / scaled)
        out.append(
            Observation(
                rec,
                feats,
                state_weight(rec.busy_cores),
                math.log(rec.actual_s / roof.run_s),
                log_error,
                Shape.of(feats),
            )
        )
    return out


def similarity(a: WorkFeatures | Shape, b: WorkFeatures | Shape) -> float:
    """How alike two workloads are for timing purposes, in (0, 1]: the same dominant layer kind,
    FLOPs per sample within a factor of ~e, batch sizes and layer counts close."""
    sa = a if isinstance(a, Shape) else Shape.of(a)
    sb = b if isinstance(b, Shape) else Shape.of(b)
    kind = 1.0 if sa.kind == sb.kind else 0.15
    d = (
        (sa.log_flops - sb.log_flops) ** 2 / 2.0
        + (sa.log_batch - sb.log_batch) ** 2 / 1.28
        + (sa.layers - sb.layers) ** 2 / 8.0
    )
    return kind * math.exp(-d)


# Another workload's run measured differently: one side's roofline was scaled to its own probed
# step and the other's was not, so its residual is mostly what that roofline missed about its own
# ops, which the probe has already measured here. (The zoo's tiny MLP, unprobed, ran its 2-thread
# plan 2x its roofline; carried over, that made a probed regression MLP's 2-thread plan look 2x
# slower than it ran: docs/measurements.md#same-math-faster-plan_vs_defaultpy.)
PROBE_MISMATCH = 0.1
SETTINGS_MATCH = 0.3  # a run in another layout or precision: its residual says how this machine
# runs the plan's threads and device now, not how the setting does; its own runs soon outweigh it


def plan_match(a: Plan, b: Plan) -> float:
    if a.backend != b.backend:
        return 0.0
    settings = 1.0 if (a.memory_format, a.precision) == (b.memory_format, b.precision) else SETTINGS_MATCH
    if a.backend == "cpu":
        return settings if (a.threads, a.mode) == (b.threads, b.mode) else 0.0
    return settings * (1.0 if (a.device, a.mode) == (b.device, b.mode) else 0.7)


def similarities(obs: list[Observation], feats: WorkFeatures) -> list[float]:
    """similarity(feats, o.features) for every observation: computed once per workload and shared
    by every plan's prediction (this loop is most of the thinking time on a long history)."""
    shape = Shape.of(feats)
    return [similarity(shape, o.shape) for o in obs]


def correction(
    obs: list[Observation],
    footprint: str,
    feats: WorkFeatures,
    plan: Plan,
    busy_weight: float,
    sims: list[float] | None = None,
) -> Correction:
    values: list[tuple[float, float]] = []  # (log ratio, weight)
    exact = similar = 0
    sims = sims if sims is not None else similarities(obs, feats)
    for o, sim in zip(obs, sims, strict=False):
        pm = plan_match(plan, o.record.plan)
        if pm == 0.0:
            continue
        load = math.exp(-(((busy_weight - o.busy_weight) / 0.25) ** 2))
        if load < 0.05:
            continue
        same = o.record.footprint == footprint
        measured_alike = (o.features.probe_step_s > 0) == (feats.probe_step_s > 0)
        w = pm * load * (EXACT_BONUS if same else sim * (1.0 if measured_alike else PROBE_MISMATCH))
        if w < 1e-3:
            continue
        values.append((o.log_ratio, w))
        if same and load > 0.5 and pm >= 1.0:
            exact += 1
        elif w > 0.1:
            similar += 1
    if not values:
        return Correction(0.0, 0.0, 0, 0)
    den = sum(w for _, w in values)
    return Correction(robust_mean(values) * den / (den + PRIOR_WEIGHT), den, exact, similar)


def robust_mean(values: list[tuple[float, float]], scale: float = HUBER_SCALE) -> float:
    """Weighted Huber mean of log ratios, started at the weighted median.

    Timing on a shared machine has heavy tails (a run that met another process's burst takes far
    longer: docs/measurements.md#cited-in-the-code-prediction); a plain mean lets one such run drag
    every later prediction, a median ignores how the bulk spreads. Points further than `scale` from
    the centre count with weight scale/distance.
    """
    ordered = sorted(values)
    half = sum(w for _, w in ordered) / 2
    acc = 0.0
    centre = ordered[-1][0]
    for v, w in ordered:
        acc += w
        if acc >= half:
            centre = v
            break
    for _ in range(3):
        num = den = 0.0
        for v, w in values:
            d = abs(v - centre)
            hw = w * (1.0 if d <= scale else scale / d)
            num += hw * v
            den += hw
        centre = num / den
    return centre


def measured_error(
    obs: list[Observation], feats: WorkFeatures, prior: float, sims: list[float] | None = None
) -> tuple[float, float]:
    """(RMS relative error of past predictions for this kind of workload, evidence in runs).
    Recent runs count more than old ones: the model that made them has learnt since."""
    num = prior**2 * ERROR_PRIOR_RUNS
    den = ERROR_PRIOR_RUNS
    evidence = 0.0
    sims = sims if sims is not None else similarities(obs, feats)
    decay = 1.0
    for o, sim in zip(obs, sims, strict=False):  # newest first
        decay *= 0.97
        if o.log_error is None:
            continue
        w = sim * decay
        num += w * o.log_error**2
        den += w
        evidence += w
    return max(math.sqrt(num / den), MIN_ERROR), evidence
