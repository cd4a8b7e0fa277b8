"""Layout, precision and compilation as parts of a plan: the settings that change a step's speed
and not its math (mixed precision changes its rounding, so it is only offered when asked for).

Every plan that trains on a CPU, a GPU or a split comes in each layout the job can use (channels_last
for a model with 2-D convolutions on 4-D inputs) and each precision the user allows, so the agent
weighs them by prediction like threads and loader workers. A precision the device does not run
natively is listed once per backend, excluded, with the reason. After the decision the trace says
what each setting was predicted to be worth for this job, and when compiling pays back.
"""

from __future__ import annotations

from typing import Any

from trainpilot.plans import CHANNELS_LAST, COMPILED, Availability, Plan, PlanPrediction

MEMORY_FORMAT_CHOICES = ("auto", "contiguous", CHANNELS_LAST)
PRECISION_CHOICES = ("fp32", "auto", "bf16", "fp16")
MIXED = ("bf16", "fp16")
_SETTABLE = ("cpu", "cuda", "mps", "split")
# A split's workers return gradients through autograd.grad, unscaled: fp16 without a loss scaler
# underflows, so a split runs fp32 or bf16 (fp32's exponent range).
NO_FP16_SPLIT = "a split's workers compute unscaled gradients, and fp16 needs a loss scaler: bf16 or fp32 only"


def check_choices(
    memory_format: str, precision: str, names: tuple[str, str] = ("--memory-format", "--precision")
) -> None:
    """A ConfigError for a layout or precision that is not one of the choices (`names`: how the
    caller spells the two: the CLI's options, or the Python API's arguments)."""
    from trainpilot.errors import ConfigError

    for name, value, choices in zip(
        names, (memory_format, precision), (MEMORY_FORMAT_CHOICES, PRECISION_CHOICES), strict=True
    ):
        if value not in choices:
            raise ConfigError(f"{name} must be one of {', '.join(choices)}, got '{value}'")


def check_native(precision: str, predictions: Any) -> None:
    """An explicit bf16|fp16 that no plan here runs natively is a ConfigError with the devices'
    reasons: emulated mixed precision is slower than fp32 and rounds anyway."""
    from trainpilot.errors import ConfigError

    if precision not in MIXED or not predictions:
        return
    mine = [p for p in predictions if p.plan.precision == precision]
    if any(not p.excluded for p in mine):
        return
    reasons = "; ".join(dict.fromkeys(str(p.excluded_reason) for p in mine)) or "no device offers it"
    raise ConfigError(f"--precision {precision}: nothing here runs it natively ({reasons}); use fp32 or auto")


def offers_channels_last(profile: Any) -> bool:
    """Whether the job's model convolves 4-D inputs (job/prepare.py found it so)."""
    extra = getattr(profile, "extra", None) or {}
    return bool(extra.get("channels_last_applies"))


def layouts(profile: Any, memory_format: str) -> list[str | None]:
    if not offers_channels_last(profile) or memory_format == "contiguous":
        return [None]
    return [CHANNELS_LAST] if memory_format == CHANNELS_LAST else [None, CHANNELS_LAST]


def precisions(precision: str) -> list[str | None]:
    if precision == "auto":
        return [None, *MIXED]
    return [None] if precision in ("fp32", "", None) else [precision]


def cpu_precisions(precision: str) -> tuple[str, ...]:
    """The mixed precisions a job's step should be probed in on this CPU (job/prepare.py)."""
    from trainpilot.machine.precision_support import native_precision

    return tuple(p for p in precisions(precision) if p and native_precision(Plan("cpu"), p))


def with_step_settings(
    candidates: list[tuple[Plan, Availability]],
    profile: Any,
    memory_format: str = "auto",
    precision: str = "fp32",
    native: Any = None,
) -> list[tuple[Plan, Availability]]:
    """Each runnable plan in every allowed (layout, precision); `native(plan, precision)` says
    whether a device runs a precision natively (machine/precision_support.native_precision)."""
    if native is None:
        from trainpilot.machine.precision_support import native_precision as native
    formats = layouts(profile, memory_format)
    wanted = precisions(precision)
    failed = (getattr(profile, "extra", None) or {}).get("settings_error")
    out: list[tuple[Plan, Availability]] = []
    refused: set[tuple[str, str | None]] = set()
    for plan, avail in candidates:
        if not avail or plan.backend not in _SETTABLE:
            out.append((plan, avail))
            continue
        for p in wanted:
            ok = native(plan, p) if p else Availability(True)
            if ok and p == "fp16" and plan.workers:
                ok = Availability(False, NO_FP16_SPLIT)
            if not ok:
                if (plan.backend, p) not in refused:  # once per backend: the reason is the device's
                    refused.add((plan.backend, p))
                    out.append((Plan(plan.backend, device=plan.device).with_settings(precision=p), ok))
                continue
            for fmt in formats:
                variant = plan.with_settings(fmt, p)
                if failed and (fmt or p) and plan.backend in ("cpu", "split"):
                    out.append((variant, Availability(False, f"its probe step failed: {failed}")))
                else:
                    out.append((variant, avail))
    return out


def settings_line(profile: Any, memory_format: str, precision: str) -> str | None:
    """What the trace says about layouts and precisions before the plans."""
    parts = []
    failed = (getattr(profile, "extra", None) or {}).get("settings_error")
    if offers_channels_last(profile):
        if memory_format == "auto":
            parts.append("layouts weighed: contiguous (NCHW) and channels_last")
        else:
            parts.append(f"the layout is {memory_format}, as asked")
    elif memory_format == CHANNELS_LAST:
        parts.append("channels_last asked, but the model has no 2-D convolution on 4-D inputs: it trains contiguous")
    if failed:
        parts.append(f"the job's step failed in another layout or precision ({failed}): those plans are excluded")
    if precision == "fp32":
        parts.append("precision fp32 (--precision auto weighs native bf16/fp16 too)")
    elif precision == "auto":
        parts.append("fp32 and each mixed precision the hardware runs natively are weighed")
    else:
        parts.append(f"precision {precision} (autocast), as asked")
    return "; ".join(parts) if parts else None


def _twin(predictions: list[PlanPrediction], plan: Plan, **change: Any) -> PlanPrediction | None:
    from dataclasses import replace

    want = replace(plan, **change)
    return next((p for p in predictions if p.plan == want and p.predicted_s), None)


def settings_reasons(chosen: Plan, predictions: list[PlanPrediction], epochs: int) -> list[str]:
    """Why the chosen plan has its layout, precision and compilation: each against the same plan
    without (or with) it, as predicted for this job."""
    mine = next((p for p in predictions if p.plan == chosen and p.predicted_s), None)
    if mine is None or mine.predicted_s is None:
        return []
    where = f"at {chosen.threads} thread(s)" if chosen.backend == "cpu" and chosen.threads else f"on {chosen.backend}"
    lines = []
    other = _twin(predictions, chosen, memory_format=None if chosen.memory_format else CHANNELS_LAST)
    if other is not None and other.predicted_s:
        if chosen.memory_format:
            lines.append(
                f"channels_last: predicted {other.predicted_s / mine.predicted_s:.2f}x faster for this model {where}"
            )
        else:
            lines.append(
                f"contiguous: channels_last predicted {mine.predicted_s / other.predicted_s:.2f}x here ({where})"
            )
    if chosen.precision:
        fp32 = _twin(predictions, chosen, precision=None)
        if fp32 is not None and fp32.predicted_s:
            lines.append(
                f"{chosen.precision}: predicted {fp32.predicted_s / mine.predicted_s:.2f}x faster than fp32 {where}"
            )
    line = payback_line(chosen, predictions, epochs)
    if line:
        lines.append(line)
    return lines


def payback_line(chosen: Plan, predictions: list[PlanPrediction], epochs: int) -> str | None:
    """When torch.compile pays back for the chosen thread count and layout: its compile time
    against what it saves per epoch, in epochs of this run's length."""
    compiled = _twin(predictions, chosen, mode=COMPILED) if chosen.backend == "cpu" else None
    eager = _twin(predictions, chosen, mode=None) if chosen.backend == "cpu" else None
    if compiled is None or eager is None:
        return None
    compile_s = float(compiled.detail.get("breakdown_s", {}).get("compile", 0.0) or 0.0)
    saved = float(eager.detail.get("per_epoch_s") or 0.0) - float(compiled.detail.get("per_epoch_s") or 0.0)
    if compile_s <= 0:
        return None
    if saved <= 0:
        return f"compiled: never pays here (compiling ~{compile_s:.1f}s, and its steps are not predicted faster)"
    after = compile_s / saved
    verdict = "pays within this run" if after <= epochs else "does not pay within this run"
    return (
        f"compiled: pays after {after:.1f} epochs (compiling ~{compile_s:.1f}s, saves {saved:.2f}s an epoch);"
        f" {verdict} of {epochs}"
    )
