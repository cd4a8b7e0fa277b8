"""Described target machines: hardware profiles to predict plans for a machine you are not on.

`trainpilot headless plan --hardware profiles/apple-m2.toml` lets a user on Linux see what the agent
would choose on a Mac. A profile is a small TOML file of published figures (peak FLOP/s per
execution unit, memory bandwidth, core counts, precision), each file citing its sources. Predictions
made from it are predictions for a *described* machine: nothing in it was measured here.

File format (units are the ones spec sheets use; the loader converts to SI):

    name = "Apple M2"
    description = "8-core CPU (4P + 4E), 10-core GPU, 16-core Neural Engine"
    sources = ["https://...", "derived: ..."]
    system = "Darwin"                 # Darwin | Linux | Windows
    machine = "arm64"
    logical_cpus = 8
    performance_cores = 4
    memory_gib = 16
    cpu_gflops_per_core = 55.0        # sustained FP32 GFLOP/s of one performance core

    [backends.cpu]                    # one table per backend: cpu (required), mps, ane, cuda
    peak_tflops = 0.58
    memory_bandwidth_gb_per_s = 100   # decimal GB/s, as vendors quote it
    precision = "fp32"                # fp32 | tf32 | bf16 | fp16 | int8
    notes = "..."                     # optional
    power_w = 170                     # optional: the unit's power when busy (TDP / board power), for energy estimates

    [compression]                     # optional: which sparsity patterns turn into speed there
    patterns = ["structured"]         # structured | semi-structured-2:4 | unstructured
    sources = ["https://..."]         # why each listed pattern pays on this machine

Any other key, a wrong type or an impossible combination (an ANE on Linux, CUDA on macOS) is a
ConfigError naming the file and the problem.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trainpilot.errors import ConfigError
from trainpilot.tomlfile import read_toml

BACKENDS = ("cpu", "mps", "ane", "cuda")
PRECISIONS = ("fp32", "tf32", "bf16", "fp16", "int8")
SYSTEMS = ("Darwin", "Linux", "Windows")
PREDICTED_NOTE = "predicted for a described machine"

_TOP_KEYS = {
    "name": str,
    "description": str,
    "sources": list,
    "system": str,
    "machine": str,
    "logical_cpus": int,
    "performance_cores": int,
    "memory_gib": (int, float),
    "cpu_gflops_per_core": (int, float),
    "backends": dict,
    "compression": dict,
}
_BACKEND_KEYS = {
    "peak_tflops": (int, float),
    "memory_bandwidth_gb_per_s": (int, float),
    "precision": str,
    "notes": str,
    "power_w": (int, float),
}
_OPTIONAL = {"notes", "power_w", "compression"}
# Sparsity patterns a profile may say pay on its machine (see trainpilot.compress.target).
SPARSITY_PATTERNS = ("structured", "semi-structured-2:4", "unstructured")
_COMPRESSION_KEYS = {"patterns": list, "sources": list}


@dataclass(frozen=True)
class TargetBackend:
    peak_flops: float  # FLOP/s (for the ANE: Apple's "operations per second")
    memory_bandwidth_bytes_per_s: float
    precision: str
    notes: str = ""
    power_w: float | None = None  # watts when busy (TDP, board power): energy estimates (energy/figures.py)


@dataclass(frozen=True)
class TargetMachine:
    name: str
    description: str
    sources: tuple[str, ...]
    system: str
    machine: str
    logical_cpus: int
    performance_cores: int
    memory_bytes: int
    cpu_flops_per_core: float  # sustained FP32 FLOP/s of one performance core
    backends: dict[str, TargetBackend] = field(default_factory=dict)
    # [compression]: {"patterns": (...), "sources": (...)}; empty when the profile says nothing
    compression: dict[str, tuple[str, ...]] = field(default_factory=dict)

    def backend_names(self) -> list[str]:
        return [name for name in BACKENDS if name in self.backends]

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "description": self.description,
            "sources": list(self.sources),
            "system": self.system,
            "machine": self.machine,
            "logical_cpus": self.logical_cpus,
            "performance_cores": self.performance_cores,
            "memory_bytes": self.memory_bytes,
            "cpu_flops_per_core": self.cpu_flops_per_core,
            "backends": {name: vars(backend).copy() for name, backend in self.backends.items()},
            "compression": {key: list(values) for key, values in self.compression.items()},
            "note": PREDICTED_NOTE,
        }


def _type_name(expected: type | tuple[type, ...]) -> str:
    names = {int: "an integer", float: "a number", str: "a string", list: "a list", dict: "a table"}
    if isinstance(expected, tuple):
        return "a number"
    return names.get(expected, expected.__name__)


def _check_keys(table: dict[str, Any], spec: dict[str, Any], where: str, path: Path) -> None:
    for key in table:
        if key not in spec:
            raise ConfigError(f"unknown key '{key}'{where} (expected {', '.join(spec)})", path)
    for key, expected in spec.items():
        if key not in table:
            if key in _OPTIONAL:
                continue
            raise ConfigError(f"missing required key '{key}'{where}", path)
        value = table[key]
        if isinstance(value, bool) or not isinstance(value, expected):
            raise ConfigError(f"'{key}'{where} must be {_type_name(expected)}, got {value!r}", path)


def _positive(value: float, key: str, path: Path, scale: float = 1.0) -> float:
    """A figure > 0 that stays finite in base units (1e308 TFLOP/s overflows to inf FLOP/s)."""
    if not value > 0:
        raise ConfigError(f"'{key}' must be greater than 0, got {value!r}", path)
    scaled = float(value) * scale
    if not math.isfinite(scaled):
        raise ConfigError(f"'{key}' = {value!r} is not a finite figure", path)
    return scaled


def _backend(name: str, table: Any, system: str, machine: str, path: Path) -> TargetBackend:
    where = f" in [backends.{name}]"
    if name not in BACKENDS:
        raise ConfigError(f"unknown backend [backends.{name}] (choose from {', '.join(BACKENDS)})", path)
    if not isinstance(table, dict):
        raise ConfigError(f"[backends.{name}] must be a table", path)
    _check_keys(table, _BACKEND_KEYS, where, path)
    if table["precision"] not in PRECISIONS:
        raise ConfigError(
            f"'precision'{where} must be one of {', '.join(PRECISIONS)}, got {table['precision']!r}", path
        )
    if name in ("ane", "mps") and system != "Darwin":
        raise ConfigError(f"[backends.{name}] exists only on macOS, but system is {system}", path)
    if name == "ane" and machine != "arm64":
        raise ConfigError('[backends.ane] needs Apple Silicon (machine = "arm64")', path)
    if name == "cuda" and system == "Darwin":
        raise ConfigError("[backends.cuda] cannot be on macOS (no CUDA driver since macOS 10.14)", path)
    return TargetBackend(
        peak_flops=_positive(table["peak_tflops"], "peak_tflops", path, 1e12),
        memory_bandwidth_bytes_per_s=_positive(
            table["memory_bandwidth_gb_per_s"], "memory_bandwidth_gb_per_s", path, 1e9
        ),
        precision=table["precision"],
        notes=table.get("notes", ""),
        power_w=_positive(table["power_w"], "power_w", path) if "power_w" in table else None,
    )


def _compression(table: Any, path: Path) -> dict[str, tuple[str, ...]]:
    if table is None:
        return {}
    _check_keys(table, _COMPRESSION_KEYS, " in [compression]", path)
    patterns, sources = table["patterns"], table["sources"]
    unknown = [p for p in patterns if p not in SPARSITY_PATTERNS]
    if not patterns or unknown:
        raise ConfigError(
            f"'patterns' in [compression] must list some of {', '.join(SPARSITY_PATTERNS)}, got {patterns!r}", path
        )
    if not sources or not all(isinstance(s, str) and s.strip() for s in sources):
        raise ConfigError(
            "'sources' in [compression] must say, in at least one non-empty string, why those patterns pay", path
        )
    return {"patterns": tuple(patterns), "sources": tuple(s.strip() for s in sources)}


def parse_target(data: dict[str, Any], path: Path) -> TargetMachine:
    _check_keys(data, _TOP_KEYS, "", path)
    sources = data["sources"]
    if not sources or not all(isinstance(s, str) and s.strip() for s in sources):
        raise ConfigError("'sources' must list at least one non-empty string (where each figure comes from)", path)
    if data["system"] not in SYSTEMS:
        raise ConfigError(f"'system' must be one of {', '.join(SYSTEMS)}, got {data['system']!r}", path)
    for key in ("name", "machine"):
        if not data[key].strip():
            raise ConfigError(f"'{key}' must not be empty", path)
    logical, performance = data["logical_cpus"], data["performance_cores"]
    if logical < 1 or performance < 1:
        raise ConfigError("'logical_cpus' and 'performance_cores' must be at least 1", path)
    if performance > logical:
        raise ConfigError(f"'performance_cores' ({performance}) cannot exceed 'logical_cpus' ({logical})", path)
    backends = {
        name: _backend(name, table, data["system"], data["machine"], path) for name, table in data["backends"].items()
    }
    if "cpu" not in backends:
        raise ConfigError("[backends.cpu] is required: every machine has a CPU", path)
    return TargetMachine(
        name=data["name"].strip(),
        description=data["description"].strip(),
        sources=tuple(s.strip() for s in sources),
        system=data["system"],
        machine=data["machine"],
        logical_cpus=logical,
        performance_cores=performance,
        memory_bytes=int(_positive(data["memory_gib"], "memory_gib", path, 2**30)),
        cpu_flops_per_core=_positive(data["cpu_gflops_per_core"], "cpu_gflops_per_core", path, 1e9),
        backends={name: backends[name] for name in BACKENDS if name in backends},
        compression=_compression(data.get("compression"), path),
    )


def load_target(path: str | Path) -> TargetMachine:
    """Read and validate a hardware profile; any problem is a one-line ConfigError naming the file."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError("hardware profile not found", path)
    return parse_target(read_toml(path, "hardware profile"), path)


def shipped_profiles_dir() -> Path:
    """Shipped profiles: inside the installed package (the wheel copies them there), else the
    profiles/ folder of a source checkout (core/trainpilot/ -> repository root)."""
    package = Path(__file__).resolve().parents[1]  # trainpilot/, this module being machine/target_profiles.py
    packaged = package / "profiles"
    return packaged if packaged.is_dir() else package.parents[1] / "profiles"


def shipped_profiles() -> dict[str, Path]:
    """Shipped profiles by name (file stem), e.g. {"apple-m2": Path(...)}; empty if not shipped."""
    folder = shipped_profiles_dir()
    return {p.stem: p for p in sorted(folder.glob("*.toml"))} if folder.is_dir() else {}


def resolve_target(reference: str | Path) -> TargetMachine:
    """A path to a .toml file, or the name of a shipped profile ("apple-m2")."""
    path = Path(reference)
    if path.suffix != ".toml" and not path.exists():
        shipped = shipped_profiles()
        if str(reference) in shipped:
            return load_target(shipped[str(reference)])
        names = ", ".join(shipped) or "none shipped"
        raise ConfigError(f"no hardware profile named '{reference}' (shipped: {names}; or give a path to a .toml file)")
    return load_target(path)
