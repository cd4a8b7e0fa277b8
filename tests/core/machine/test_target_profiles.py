"""Hardware target profiles: the shipped files load, cite sources, and malformed files fail in one line."""
from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from trainpilot.errors import ConfigError
from trainpilot.machine.target_profiles import (
    PREDICTED_NOTE,
    TargetBackend,
    TargetMachine,
    load_target,
    resolve_target,
    shipped_profiles,
)

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "profiles"


def test_every_shipped_profile_loads_and_cites_its_sources() -> None:
    profiles = shipped_profiles()
    assert {"apple-m1", "apple-m2", "apple-m3-pro", "linux-cuda-rtx4090"} <= set(profiles)
    for name, path in profiles.items():
        target = load_target(path)
        assert target.sources and all(s.startswith(("https://", "derived:")) for s in target.sources), name
        assert "cpu" in target.backends
        assert target.performance_cores <= target.logical_cpus


def test_apple_m2_figures_in_si_units() -> None:
    m2 = resolve_target("apple-m2")
    assert (m2.system, m2.machine, m2.logical_cpus, m2.performance_cores) == ("Darwin", "arm64", 8, 4)
    assert m2.memory_bytes == 16 * 2**30
    assert m2.cpu_flops_per_core == pytest.approx(56e9)
    assert m2.backend_names() == ["cpu", "mps", "ane"]
    assert m2.backends["ane"] == TargetBackend(15.8e12, 100e9, "fp16", m2.backends["ane"].notes)
    assert "no public API trains on it" in m2.backends["ane"].notes
    assert m2.backends["mps"].memory_bandwidth_bytes_per_s == pytest.approx(100e9)


def test_cuda_workstation_has_no_apple_backends() -> None:
    box = resolve_target("linux-cuda-rtx4090")
    assert box.backend_names() == ["cpu", "cuda"]
    assert box.backends["cuda"].peak_flops == pytest.approx(82.6e12)


def test_the_dataclass_keeps_the_agreed_field_names() -> None:
    assert [f.name for f in dataclasses.fields(TargetMachine)] == [
        "name", "description", "sources", "system", "machine", "logical_cpus", "performance_cores",
        "memory_bytes", "cpu_flops_per_core", "backends",
        "compression",  # optional [compression] (which sparsity patterns pay), added after the agreement, at the end
    ]
    # power_w (optional, for energy estimates) was added after the agreement, at the end
    assert [f.name for f in dataclasses.fields(TargetBackend)] == ["peak_flops", "memory_bandwidth_bytes_per_s", "precision", "notes", "power_w"]
    target = resolve_target("apple-m1")
    with pytest.raises(dataclasses.FrozenInstanceError):
        target.name = "x"  # type: ignore[misc]
    data = target.to_dict()
    assert data["note"] == PREDICTED_NOTE and data["backends"]["ane"]["precision"] == "fp16"


def test_a_path_works_as_well_as_a_name(tmp_path: Path) -> None:
    target = load_target(FIXTURES / "minimal.toml")
    assert target.name == "Minimal box" and target.backend_names() == ["cpu"]
    assert resolve_target(FIXTURES / "minimal.toml") == target
    with pytest.raises(ConfigError, match="no hardware profile named 'apple-m9'.*apple-m2"):
        resolve_target("apple-m9")


@pytest.mark.parametrize(
    ("fixture", "problem"),
    [
        ("bad-syntax.toml", "not valid TOML: "),
        ("unknown-key.toml", "unknown key 'cpu_cores' (expected name, description"),
        ("missing-key.toml", "missing required key 'memory_gib'"),
        ("wrong-type.toml", "'logical_cpus' must be an integer, got '8'"),
        ("no-sources.toml", "'sources' must list at least one non-empty string"),
        ("ane-on-linux.toml", "[backends.ane] exists only on macOS, but system is Linux"),
        ("cuda-on-mac.toml", "[backends.cuda] cannot be on macOS"),
        ("bad-precision.toml", "'precision' in [backends.cpu] must be one of fp32, tf32, bf16, fp16, int8, got 'fp64'"),
        ("negative-bandwidth.toml", "'memory_bandwidth_gb_per_s' must be greater than 0, got -5"),
        ("no-cpu.toml", "[backends.cpu] is required"),
        ("unknown-backend.toml", "unknown backend [backends.tpu]"),
        ("too-many-p-cores.toml", "'performance_cores' (16) cannot exceed 'logical_cpus' (8)"),
    ],
)
def test_malformed_files_fail_with_file_and_problem_in_one_line(fixture: str, problem: str) -> None:
    path = FIXTURES / fixture
    with pytest.raises(ConfigError) as info:
        load_target(path)
    message = str(info.value)
    assert message.startswith(f"{path}: ") and problem in message
    assert "\n" not in message


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="hardware profile not found"):
        load_target(tmp_path / "nope.toml")
