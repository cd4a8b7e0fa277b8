"""The deployment controller: the best configuration's model is fine-tuned, measured again and
exported only when both thresholds hold — accuracy drop <= the maximum (test set, never seen by
the search) and speed-up >= the target (the target's cycles: measured here, predicted for a
described machine). Otherwise nothing is written and the report says why.

The accuracy drop comes with its paired interval (drop_interval.py), the speed-up with its
interval over paired timing rounds (speedup_interval.py), and one stated rule reads both: "point"
(the default) deploys when the measured drop is within the limit and the measured speed-up clears
the target, and says how sure each is; "confident" deploys only when the drop's interval's upper
end is within the limit and the speed-up's interval's lower end clears the target.

A model that is not deployed is still saved, beside where the deployment would have gone
(`saved_path`), so the user has the best model found and the line that says how far it is from the
thresholds.

The export is a directory written atomically (a temporary sibling renamed into place, so a crash
leaves no half-written export): `model.pt` (the pruned state_dict), `plan.json` (the model, the
layer plan — channels kept and removed per layer — and the figures), and `model.mlpackage` when the
target is an Apple machine and coremltools is installed. `load_exported` rebuilds the pruned model.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import tempfile
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import torch
from torch import nn

from trainpilot.compress.cycles import StepTimes, predict_steps
from trainpilot.compress.drop_interval import DropInterval
from trainpilot.compress.finetune import RESTART_LR, Tensors, right, train_steps
from trainpilot.compress.prune import PrunedModel, rebuild
from trainpilot.compress.speedup_interval import SpeedupInterval
from trainpilot.errors import ConfigError

PLAN_FORMAT = 1
# How the accuracy drop is read: "point", the measured drop within the limit (how sure that is is
# reported beside it); "confident", the upper end of its interval within the limit.
DEPLOY_RULES = ("point", "confident")


@dataclass(frozen=True)
class Tuned:
    """A pruned model after the deployment fine-tune, with its test accuracy."""

    pruned: PrunedModel
    accuracy: float  # test accuracy, [0, 1]
    right: torch.Tensor | None = None  # which test samples it classifies right (drop_interval.paired_drop)


def tested(pruned: PrunedModel, test: Tensors, *, threads: int) -> Tuned:
    """`pruned` scored on the test split, sample by sample."""
    scored = right(pruned.model, test, threads=threads)
    return Tuned(pruned, int(scored.sum()) / max(len(test), 1), scored)


@dataclass(frozen=True)
class Verdict:
    deployed: bool
    reason: str
    accuracy_drop: float  # points
    speedup: float  # on the target's cycles
    speedup_label: str
    exported: dict[str, str] = field(default_factory=dict)
    interval: DropInterval | None = None  # the drop's paired interval (None: nothing was tested)
    rule: str = "point"
    speed: SpeedupInterval | None = None  # the speed-up's interval on the target's cycles (None: nothing was timed)
    saved: dict[str, str] = field(default_factory=dict)  # not deployed: where the best model found was saved


def deployment_fine_tune(
    pruned: PrunedModel,
    train: Tensors,
    *,
    steps: int,
    batch: int,
    seed: int,
    threads: int,
    teacher: nn.Module | None = None,
) -> PrunedModel:
    """The deployment fine-tune, `steps` steps (budget.py) of a warm restart at RESTART_LR distilling
    from `teacher` (the dense model): the same budget and recipe for the agent's finalists and the
    baselines. In place."""
    train_steps(
        pruned.model, train, steps=steps, batch=batch, lr=RESTART_LR, seed=seed, threads=threads, teacher=teacher
    )
    return pruned


def fine_tune(
    pruned: PrunedModel,
    train: Tensors,
    test: Tensors,
    *,
    steps: int,
    batch: int,
    seed: int,
    threads: int,
    teacher: nn.Module | None = None,
) -> Tuned:
    """The deployment fine-tune, then the test accuracy."""
    deployment_fine_tune(pruned, train, steps=steps, batch=batch, seed=seed, threads=threads, teacher=teacher)
    return tested(pruned, test, threads=threads)


def predicted_on(
    machines: dict[str, Any],
    dense: nn.Module,
    pruned: nn.Module,
    sample_shape: tuple[int, ...],
    num_classes: int,
    batch: int,
) -> dict[str, StepTimes]:
    return {
        name: predict_steps({"dense": dense, "pruned": pruned}, sample_shape, num_classes, batch=batch, machine=m)
        for name, m in machines.items()
    }


def judge(
    drop: DropInterval,
    speed: SpeedupInterval,
    *,
    max_drop: float,
    target_speedup: float,
    rule: str = "point",
) -> Verdict:
    """Deploy or not, by `rule` (DEPLOY_RULES), read the same way for the accuracy drop against its
    limit and for the speed-up against the target."""
    if rule not in DEPLOY_RULES:
        raise ValueError(f"unknown deployment rule {rule!r} (one of {', '.join(DEPLOY_RULES)})")
    sure = drop.within(max_drop)
    interval = f"{drop.confidence:.0%} interval {drop.low:.2f} to {drop.high:.2f}"
    problems = []
    if drop.drop > max_drop + 1e-9:
        problems.append(f"accuracy drops {drop.drop:.2f} points (allowed {max_drop:g}; {interval})")
    elif rule == "confident" and drop.high > max_drop + 1e-9:
        problems.append(
            f"the accuracy drop's {interval} reaches above the allowed {max_drop:g} points"
            f" (--deploy-rule confident; the measured drop is {drop.drop:.2f})"
        )
    speed_problem = speed_shortfall(speed, target_speedup, rule)
    if speed_problem:
        problems.append(speed_problem)
    verdict = Verdict(False, "", drop.drop, speed.ratio, speed.label, interval=drop, rule=rule, speed=speed)
    if problems:
        return replace(verdict, reason="not deployed: " + "; ".join(problems))
    how_sure = (
        f"{interval}: within the limit"
        if drop.high <= max_drop + 1e-9
        else f"{interval}: {sure:.0%} sure it is within the limit"
    )
    return replace(
        verdict,
        deployed=True,
        reason=f"deployed: {speed.label} speed-up {speed_text(speed, target_speedup)} >= {target_speedup:g}x"
        f" at {drop.drop:.2f} points accuracy drop (<= {max_drop:g}; {how_sure})",
    )


def speed_text(speed: SpeedupInterval, target_speedup: float) -> str:
    """'1.58x (95 % interval 1.49 to 1.66x over 31 rounds; 99 % sure it clears 1.5x)'; exact: '1.58x'
    (the reasons name the label before it)."""
    return f"{speed.ratio:.2f}x" if speed.exact else speed.text(clears=target_speedup)


def speed_shortfall(speed: SpeedupInterval, target_speedup: float, rule: str) -> str:
    """Why the speed-up does not clear the target by `rule`, in one clause; '' when it does."""
    if speed.ratio < target_speedup:
        short = 1.0 - speed.ratio / target_speedup
        return (
            f"{speed.label} speed-up {speed_text(speed, target_speedup)} is below the target {target_speedup:g}x"
            f" ({short:.1%} short)"
        )
    if rule == "confident" and speed.low < target_speedup:
        return (
            f"the speed-up's interval reaches below the target {target_speedup:g}x (--deploy-rule confident;"
            f" measured {speed_text(speed, target_speedup)})"
        )
    return ""


def coremltools_installed() -> bool:
    return importlib.util.find_spec("coremltools") is not None


def export(
    out_dir: str | Path, tuned: Tuned, document: dict[str, Any], sample_shape: tuple[int, ...], *, mlpackage: bool
) -> dict[str, str]:
    """Write the export directory atomically; returns the paths written. Refuses an existing path."""
    out = Path(out_dir).expanduser()
    if out.exists():
        raise ConfigError("the export directory already exists; choose a new --out", out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    written = {"state_dict": "model.pt", "plan": "plan.json"}
    try:
        torch.save(tuned.pruned.model.state_dict(), tmp / "model.pt")
        (tmp / "plan.json").write_text(json.dumps(document, indent=2, default=str) + "\n", encoding="utf-8")
        if mlpackage:
            from trainpilot.backends.ane.convert import export_mlpackage

            export_mlpackage(tuned.pruned.model.eval(), sample_shape, tmp / "model.mlpackage")
            written["mlpackage"] = "model.mlpackage"
        os.rename(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return {key: str(out / name) for key, name in written.items()}


def plan_document(
    model_config: Any, sample_shape: tuple[int, ...], num_classes: int, tuned: Tuned, figures: dict[str, Any]
) -> dict[str, Any]:
    return {
        "format": PLAN_FORMAT,
        "model": model_config,
        "sample_shape": list(sample_shape),
        "num_classes": num_classes,
        "layers": tuned.pruned.plan(),
        "figures": figures,
    }


def load_exported(directory: str | Path, dense: nn.Module | None = None) -> nn.Module:
    """The pruned model of an export: the dense architecture rebuilt, its removed channels removed
    again, the weights loaded (weights_only: nothing in the file is executed). A job's export is
    rebuilt from its `file.py:make_job` (that file runs, as `--job` runs it), or from `dense`: a
    fresh dense model of the same architecture (how a Job compressed from Python is loaded)."""
    from trainpilot.job.models import build_model

    directory = Path(directory)
    document = json.loads((directory / "plan.json").read_text(encoding="utf-8"))
    if document.get("format") != PLAN_FORMAT:
        raise ConfigError(f"unknown plan format {document.get('format')!r}", directory / "plan.json")
    shape = tuple(int(d) for d in document["sample_shape"])
    described = document["model"]
    if dense is None and isinstance(described, dict) and "job" in described:
        if not described["job"]:
            raise ConfigError(
                "was exported from a Job object: pass a fresh dense model, load_exported(directory, dense=...)",
                directory / "plan.json",
            )
        from trainpilot.compress.user_job import compressible_job

        dense = compressible_job(str(described["job"])).make_model()
    if dense is None:
        dense = build_model(described, shape, int(document["num_classes"]))
    model = rebuild(dense, document["layers"], shape)
    model.load_state_dict(torch.load(directory / "model.pt", weights_only=True))
    return model.eval()
