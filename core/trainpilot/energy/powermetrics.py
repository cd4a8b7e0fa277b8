"""macOS energy from the power sampler the monitor already runs (machine/samplers/apple.py: powermetrics,
or macmon/mactop): CPU + GPU + ANE watts integrated over time.

Those watts are Apple's own model-based figures (the sampler shows them "W, est."), so energy from
them is labelled est. too, with the tool that gave them.
"""

from __future__ import annotations

from typing import Any

from trainpilot.energy.integrate import IntegratedPower
from trainpilot.plans import Availability

POWER_READINGS = ("CPU power", "GPU power", "ANE power")


def powermetrics_availability(
    system: str | None = None, machine: str | None = None, chooser: Any = None
) -> Availability:
    from trainpilot.machine.samplers.apple import choose_power_tool, is_apple_silicon

    if not is_apple_silicon(system, machine):
        return Availability(False, "not Apple Silicon")
    if (chooser or choose_power_tool)(1000) is None:
        from trainpilot.machine.samplers.apple import NO_TOOL

        return Availability(False, NO_TOOL)
    return Availability(True)


def apple_energy(sampler: Any = None, poll_interval_s: float = 0.5) -> IntegratedPower:
    """An energy source over an `ApplePowerSampler` (started here when not given). Until the tool
    has produced its first sample there is no reading, and nothing is added."""
    from trainpilot.machine.samplers.apple import ApplePowerSampler

    sampler = sampler or ApplePowerSampler(interval_ms=500)

    def read_w() -> float | None:
        values = [r.value for r in sampler() if r.name in POWER_READINGS and r.value is not None]
        return sum(values) if values else None

    # The sampler picks its tool (powermetrics, macmon, mactop) on a thread of its own, later.
    source = IntegratedPower(
        read_w, "est.: macOS power sampler, CPU+GPU+ANE power x time", estimated=True, poll_interval_s=poll_interval_s
    )
    source.close = getattr(sampler, "close", lambda: None)  # type: ignore[method-assign]
    return source
