"""TrainPilot: a hardware-aware agent that picks where a network trains fastest, trains it there,
and learns from the difference between predicted and actual time.

The public names are imported lazily so `import trainpilot` (and `trainpilot --help`) stays fast:
torch loads only when something that needs it is touched.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # what the lazy names are, for type checkers and editors
    from trainpilot.api import Control as Control
    from trainpilot.api import FitResult as FitResult
    from trainpilot.api import PlanReport as PlanReport
    from trainpilot.api import fit as fit
    from trainpilot.api import plan as plan
    from trainpilot.errors import JobError as JobError
    from trainpilot.errors import TrainPilotError as TrainPilotError
    from trainpilot.job.spec import Job as Job

__version__ = "0.1.0"

_LAZY = {
    "Job": "trainpilot.job.spec",
    "JobError": "trainpilot.errors",
    "TrainPilotError": "trainpilot.errors",
    "plan": "trainpilot.api",
    "fit": "trainpilot.api",
    "Control": "trainpilot.api",
    "PlanReport": "trainpilot.api",
    "FitResult": "trainpilot.api",
    "HardwareOrchestrator": "trainpilot.compat.orchestrator",
    "TrainingEnvironment": "trainpilot.compat.environment",
    "TrainingSession": "trainpilot.run.session",
    "SessionConfig": "trainpilot.run.session",
    "Plan": "trainpilot.plans",
}


def __getattr__(name: str) -> Any:
    module_name = _LAZY.get(name)
    if module_name is None:
        raise AttributeError(f"module 'trainpilot' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module_name), name)


__all__ = list(_LAZY) + ["__version__"]
