"""Power figures for estimates, where nothing on the machine measures energy.

The estimate is power figure x measured utilisation: watts per busy CPU core times the CPU
seconds the run's processes used, and an accelerator's board power times the time it was in use.
For this machine the per-core figure is TRAINPILOT_CPU_WATTS_PER_CORE when set, else a generic
one (below); a described machine (profiles/*.toml) gives `power_w` per backend, from its sources.
Every figure carries its source, and everything computed from it is labelled est.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from trainpilot.errors import ConfigError

# A desktop or server x86 CPU draws roughly its TDP over its hardware threads when all are busy:
# Ryzen 9 7950X 170 W / 32 = 5.3 W, EPYC 9654 360 W / 192 = 1.9 W, Core i9-13900K 253 W / 32 = 7.9 W.
GENERIC_W_PER_CORE = 5.0
# Board power when busy, for an accelerator no sensor reports: a mid-range figure of each kind.
GENERIC_ACCELERATOR_W = {"cuda": 250.0, "mps": 15.0, "ane": 5.0}
ENV_W_PER_CORE = "TRAINPILOT_CPU_WATTS_PER_CORE"


@dataclass(frozen=True)
class PowerFigures:
    cpu_w_per_core: float
    cpu_source: str  # "est.: 5.0 W per busy core (generic figure)", ...
    accelerator_w: dict[str, tuple[float, str]] = field(default_factory=dict)  # backend -> (W, source)

    def accelerator(self, backend: str) -> tuple[float, str]:
        if backend in self.accelerator_w:
            return self.accelerator_w[backend]
        watts = GENERIC_ACCELERATOR_W.get(backend, 0.0)
        return watts, f"est.: {watts:.0f} W {backend} board power (generic figure)"


def machine_figures(environ: Any = None) -> PowerFigures:
    """This machine's figures: the environment's per-core watts, else the generic figure."""
    env = os.environ if environ is None else environ
    raw = env.get(ENV_W_PER_CORE)
    if raw:
        try:
            watts = float(raw)
        except ValueError:
            watts = -1.0
        if not watts > 0 or watts != watts or watts == float("inf"):
            raise ConfigError(f"{ENV_W_PER_CORE} must be a positive number of watts, got {raw!r}")
        return PowerFigures(watts, f"est.: {watts:g} W per busy core ({ENV_W_PER_CORE})")
    return PowerFigures(GENERIC_W_PER_CORE, f"est.: {GENERIC_W_PER_CORE:g} W per busy core (generic figure)")


def target_figures(target: Any) -> PowerFigures:
    """A described machine's figures: each backend's `power_w` from its profile (CPU: spread over
    its logical CPUs), the generic figure where the profile gives none."""
    backends = getattr(target, "backends", {}) or {}
    cpu = backends.get("cpu")
    cpu_power = getattr(cpu, "power_w", None)
    if cpu_power:
        per_core = float(cpu_power) / max(int(target.logical_cpus), 1)
        cpu_figure = (
            per_core,
            f"est.: {cpu_power:g} W CPU power over {target.logical_cpus} threads ({target.name} profile)",
        )
    else:
        cpu_figure = (
            GENERIC_W_PER_CORE,
            f"est.: {GENERIC_W_PER_CORE:g} W per busy core (generic figure; the profile gives no power_w)",
        )
    accelerators = {
        name: (float(b.power_w), f"est.: {b.power_w:g} W {name} power ({target.name} profile)")
        for name, b in backends.items()
        if name != "cpu" and getattr(b, "power_w", None)
    }
    return PowerFigures(cpu_figure[0], cpu_figure[1], accelerators)
