"""The configuration determiner: which machine the model is compressed for, how its "cycles" are
counted, and which sparsity patterns turn into speed there (each with its source).

This machine: cycles are its measured training-step time. A described machine (`--hardware
NAME|FILE`, a shipped profile or a .toml): cycles are the cost model's predicted step time from the
profile's published figures, labelled "predicted". Only structured sparsity (whole channels or
filters removed) is searched: it shrinks the dense kernels every backend runs. Patterns that do not
pay on the target are listed with the reason and never counted as a speed-up.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

STRUCTURED = "structured"
SEMI_2_4 = "semi-structured-2:4"
UNSTRUCTURED = "unstructured"

_THIS_MACHINE_SOURCES = {
    STRUCTURED: "removing channels makes the dense CPU kernels (oneDNN / ATen) compute smaller convolutions;"
    " measured here on every candidate, interleaved with the dense model",
    UNSTRUCTURED: "dense CPU kernels multiply stored zeros at full cost: a mask saves no time here, so none is counted",
    SEMI_2_4: "torch.sparse.to_sparse_semi_structured needs NVIDIA sparse tensor cores (compute capability 8.0+)",
}
_DEFAULT_SOURCE = (
    "the profile has no [compression] section: structured pruning is assumed to pay (smaller dense kernels)"
)


@dataclass(frozen=True)
class PatternSupport:
    pattern: str
    pays: bool
    source: str

    def to_dict(self) -> dict[str, Any]:
        return {"pattern": self.pattern, "pays": self.pays, "source": self.source}


@dataclass(frozen=True)
class CompressionTarget:
    name: str
    described: Any  # a target_profiles.TargetMachine, or None for this machine
    patterns: tuple[PatternSupport, ...]

    @property
    def is_described(self) -> bool:
        return self.described is not None

    @property
    def cycles_label(self) -> str:
        """How this target's cycles are known: measured here, or predicted from published figures."""
        return "predicted" if self.is_described else "measured"

    @property
    def is_apple(self) -> bool:
        return self.is_described and getattr(self.described, "system", "") == "Darwin"

    def pays(self, pattern: str) -> bool:
        return any(p.pattern == pattern and p.pays for p in self.patterns)

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "cycles": self.cycles_label,
            "searched_pattern": STRUCTURED,
            "patterns": [p.to_dict() for p in self.patterns],
        }


def this_machine() -> CompressionTarget:
    patterns = [PatternSupport(STRUCTURED, True, _THIS_MACHINE_SOURCES[STRUCTURED])]
    sm = _cuda_capability()
    if sm is not None and sm >= (8, 0):
        patterns.append(
            PatternSupport(
                SEMI_2_4,
                True,
                f"this machine's CUDA device is compute capability {sm[0]}.{sm[1]} (8.0+ runs 2:4 sparse tensor cores);"
                " not searched: TrainPilot's agent removes whole channels",
            )
        )
    else:
        patterns.append(PatternSupport(SEMI_2_4, False, _THIS_MACHINE_SOURCES[SEMI_2_4]))
    patterns.append(PatternSupport(UNSTRUCTURED, False, _THIS_MACHINE_SOURCES[UNSTRUCTURED]))
    return CompressionTarget("this machine", None, tuple(patterns))


def described_machine(machine: Any) -> CompressionTarget:
    """A target_profiles.TargetMachine: its [compression] section says what pays, with sources."""
    section = getattr(machine, "compression", {}) or {}
    listed = tuple(section.get("patterns", ())) or (STRUCTURED,)
    sources = " | ".join(section.get("sources", ())) or _DEFAULT_SOURCE
    patterns = tuple(
        PatternSupport(
            p,
            p in listed and p != UNSTRUCTURED,
            sources if p in listed else "not listed in the profile's [compression] patterns",
        )
        for p in (STRUCTURED, SEMI_2_4, UNSTRUCTURED)
    )
    return CompressionTarget(str(machine.name), machine, patterns)


def resolve_compression_target(hardware: str | None) -> CompressionTarget:
    """None: this machine. Otherwise a shipped profile's name or a .toml path; an unknown name or a
    malformed file is a ConfigError with one line."""
    if hardware is None:
        return this_machine()
    from trainpilot.machine.target_profiles import resolve_target

    return described_machine(resolve_target(hardware))


def _cuda_capability() -> tuple[int, int] | None:
    try:
        import torch

        if torch.cuda.is_available():
            return tuple(torch.cuda.get_device_capability(0))  # type: ignore[return-value]
    except Exception:  # noqa: BLE001 - no answer is no CUDA
        return None
    return None
