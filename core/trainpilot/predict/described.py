"""Predicting a backend this machine does not have, on a described machine that has it.

The seed API documents `predict_performance(profile, "ane")` next to a hardware state that says
the Neural Engine is there; on a Linux box there is nothing here to time. So the figure comes from
a shipped hardware profile of a machine that has the backend (`profiles/`, published figures,
nothing measured here), and it says so: the value is a float, as the seed returns, that carries
the machine it was predicted for and the note "predicted for a described machine".

Defaults (`DESCRIBED_FOR`): the ANE and the Apple GPU on an Apple M2 (the plain M2 of the 2022
MacBook Air: the common middle of the shipped Apple profiles, between the M1 and the M3 Pro),
CUDA on an RTX 4090 box. The ANE is predicted in its frozen-backbone mode with every learnable
layer but the last on the Neural Engine (the seed's "train on the ANE", as close as a public
API gets: Core ML runs the forward pass there, the head trains on the CPU).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from trainpilot.machine.target_profiles import PREDICTED_NOTE, TargetMachine, resolve_target
from trainpilot.plans import Plan

if TYPE_CHECKING:
    from trainpilot.job.workload import WorkloadProfile

DESCRIBED_FOR = {"ane": "apple-m2", "mps": "apple-m2", "cuda": "linux-cuda-rtx4090"}


class PredictedSeconds(float):
    """Seconds (a float, so `f"{t:.2f}"` and arithmetic work as in the seed) that say where they
    were predicted: `machine` ("this machine" or the described one), `plan`, `note`."""

    machine: str
    plan: str
    note: str | None

    def __new__(cls, seconds: float, machine: str, plan: str, note: str | None = None) -> PredictedSeconds:
        value = super().__new__(cls, seconds)
        value.machine, value.plan, value.note = machine, plan, note
        return value

    @property
    def described(self) -> bool:
        return self.note == PREDICTED_NOTE

    def to_dict(self) -> dict[str, Any]:
        return {"predicted_s": float(self), "machine": self.machine, "plan": self.plan, "note": self.note}


def described_plan(profile: WorkloadProfile, backend: str) -> tuple[Plan, str | None]:
    """The plan of `backend` a described machine runs this workload on, and why it cannot (or None)."""
    if backend != "ane":
        return Plan(backend, device="cuda:0" if backend == "cuda" else backend), None
    from trainpilot.backends import get_backend

    if profile.layers < 2:
        return Plan("ane", mode="frozen-backbone"), "a one-layer model leaves nothing to freeze on the Neural Engine"
    ane = get_backend("ane").with_options(freeze=profile.layers - 1)  # type: ignore[attr-defined]
    plan = Plan("ane", mode="frozen-backbone")
    support = ane.supports_plan(profile, plan)
    return plan, None if support else support.reason


def predict_described(
    profile: WorkloadProfile, backend: str, machine: str | TargetMachine | None = None
) -> PredictedSeconds:
    """Whole-run seconds for `profile` on `backend` of a described machine (a shipped profile's name,
    a .toml path, or a TargetMachine; default DESCRIBED_FOR[backend]). ValueError when it has no
    such backend or the workload cannot run there."""
    from trainpilot.predict.derive import calibration_for_target
    from trainpilot.predict.features import features_of
    from trainpilot.predict.roofline import estimate

    reference = machine or DESCRIBED_FOR.get(backend)
    if reference is None:
        raise ValueError(f"no described machine has backend '{backend}' (choose from {', '.join(DESCRIBED_FOR)})")
    target = reference if isinstance(reference, TargetMachine) else resolve_target(reference)
    if backend not in target.backends:
        raise ValueError(f"the described machine {target.name} has no '{backend}' backend")
    plan, why_not = described_plan(profile, backend)
    if why_not:
        raise ValueError(f"{backend} cannot run this workload on the described machine {target.name}: {why_not}")
    roof = estimate(features_of(profile), plan, 0.0, calibration_for_target(target))  # a described machine is idle
    if roof is None:
        raise ValueError(f"the figures of {target.name} cannot predict {plan.label}")
    label = plan.label + (
        f", first {profile.layers - 1} of {profile.layers} layers on the Neural Engine" if backend == "ane" else ""
    )
    return PredictedSeconds(roof.run_s, target.name, label, PREDICTED_NOTE)
