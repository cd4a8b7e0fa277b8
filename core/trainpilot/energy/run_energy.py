"""A run's energy: its meter, opened so that a meter which cannot start costs the figure and not
the run, and its total, summed from its epochs' figures."""

from __future__ import annotations

from typing import Any

from trainpilot.energy.meter import open_meter
from trainpilot.energy.reading import EST, Energy
from trainpilot.plans import Plan


def open_run_meter(plan: Plan) -> Any:
    """The run's started energy meter (meter.py), or None when it cannot start."""
    try:
        return open_meter(plan).start()
    except Exception:  # noqa: BLE001 - e.g. a bad TRAINPILOT_CPU_WATTS_PER_CORE: no energy figure
        return None


def run_energy(epochs: list[dict[str, Any]]) -> Energy:
    """The run's joules: the sum of its epochs' (None if any epoch has none), with their source."""
    values = [e.get("energy_j") for e in epochs]
    sources = list(dict.fromkeys(e["energy_source"] for e in epochs if e.get("energy_source")))
    source = " + ".join(sources) if sources else "not metered"
    if not values or any(v is None for v in values):
        return Energy(None, source)
    return Energy(float(sum(values)), source, estimated=EST in source)  # type: ignore[arg-type]
