"""Energy per run and per plan: readers (RAPL, NVML, the macOS power sampler, an estimate from
power figures x measured utilisation), the meter that runs around a training run, predicted power
per plan, and the objective (time | energy | edp) the agent chooses by.

Nothing here imports torch; `pynvml` is imported only when a CUDA plan is metered.
"""

from __future__ import annotations

from trainpilot.energy.figures import PowerFigures, machine_figures, target_figures
from trainpilot.energy.meter import EnergyMeter, Mark, open_meter
from trainpilot.energy.objective import OBJECTIVES, check_objective, choose, figures_text, rank, score
from trainpilot.energy.plan_power import PlanPower, annotate, power_for
from trainpilot.energy.rapl import POWERCAP_ROOT, RaplEnergy, counter_delta, find_zones, rapl_availability
from trainpilot.energy.reading import EST, Energy, Watts, joules_text

__all__ = [
    "EST",
    "Energy",
    "EnergyMeter",
    "Mark",
    "OBJECTIVES",
    "POWERCAP_ROOT",
    "PlanPower",
    "PowerFigures",
    "RaplEnergy",
    "Watts",
    "annotate",
    "check_objective",
    "choose",
    "counter_delta",
    "figures_text",
    "find_zones",
    "joules_text",
    "machine_figures",
    "open_meter",
    "power_for",
    "rank",
    "rapl_availability",
    "score",
    "target_figures",
]
