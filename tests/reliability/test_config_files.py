"""Hardware profiles and theme files (read by other parts of TrainPilot), damaged in many ways:
a one-line ConfigError naming the file, or a result that is still sane. These tests call the
owners' public loaders; they do not change them."""
from __future__ import annotations

import math
import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from faultkit import corpus, scratch
from trainpilot.errors import ConfigError

REPO = Path(__file__).resolve().parents[2]
PROFILES = sorted((REPO / "profiles").glob("*.toml"))
THEMES = sorted((REPO / "themes").glob("*.toml"))
FUZZ = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
PROFILE_INF_VALUES = ["inf", "1e400", "1e308"]  # 1e308 TFLOP/s becomes inf FLOP/s
VALUES = ["0", "-1", "-1e400", "nan", "-inf", "10000000000000000000000000000", "true", '""', '" "', '"x"', "[]", "{}", '"\\u0000"', "1979-05-27", "[1, 2]", '"#GGGGGG"', '"red"', *PROFILE_INF_VALUES]


def fresh(name: str) -> Path:
    return scratch.fresh_dir("cfg") / name


def assignment_lines(text: str) -> list[int]:
    return [i for i, line in enumerate(text.splitlines()) if re.match(r"^\s*[\w\"-]+\s*=", line)]


def replace_value(text: str, line_pick: float, value: str) -> str:
    lines = text.splitlines()
    candidates = assignment_lines(text)
    index = candidates[min(int(line_pick * len(candidates)), len(candidates) - 1)]
    key = lines[index].split("=", 1)[0]
    lines[index] = f"{key}= {value}"
    return "\n".join(lines) + "\n"


def check_one_line(exc: ConfigError, path: Path) -> None:
    text = str(exc)
    assert "\n" not in text and text.startswith(str(path)) and len(text) < 500, text


def load_profile_or_refuse(path: Path) -> None:
    from trainpilot.machine.target_profiles import load_target

    try:
        target = load_target(path)
    except ConfigError as exc:
        check_one_line(exc, path)
        return
    figures = [target.memory_bytes, target.cpu_flops_per_core, target.logical_cpus, target.performance_cores]
    for backend in target.backends.values():
        figures += [backend.peak_flops, backend.memory_bandwidth_bytes_per_s]
    assert all(isinstance(f, (int, float)) and math.isfinite(f) and f > 0 for f in figures), target


def load_theme_or_refuse(path: Path) -> None:
    from trainpilot_tui.app.themes import load_theme_file

    try:
        load_theme_file(path)
    except ConfigError as exc:
        check_one_line(exc, path)


@pytest.mark.skipif(not PROFILES, reason="no shipped hardware profiles")
@FUZZ
@given(which=st.integers(0, 10), line_pick=st.floats(0, 1, exclude_max=True), value=st.sampled_from(VALUES))
def test_hardware_profile_with_a_wrong_value(which, line_pick, value):
    source = PROFILES[which % len(PROFILES)]
    path = fresh(source.name)
    path.write_text(replace_value(source.read_text(), line_pick, value))
    load_profile_or_refuse(path)


@pytest.mark.skipif(not PROFILES, reason="no shipped hardware profiles")
@FUZZ
@given(which=st.integers(0, 10), kind=st.sampled_from(corpus.MUTATIONS), position=st.floats(0, 1, exclude_max=True), size=st.integers(1, 32), seed=st.integers(0, 2**31))
def test_hardware_profile_with_damaged_bytes(which, kind, position, size, seed):
    source = PROFILES[which % len(PROFILES)]
    path = fresh(source.name)
    path.write_bytes(corpus.mutate(source.read_bytes(), kind, position, size, seed))
    load_profile_or_refuse(path)


@pytest.mark.skipif(not THEMES, reason="no shipped theme files")
@FUZZ
@given(which=st.integers(0, 10), line_pick=st.floats(0, 1, exclude_max=True), value=st.sampled_from(VALUES))
def test_theme_file_with_a_wrong_value(which, line_pick, value):
    source = THEMES[which % len(THEMES)]
    path = fresh(source.name)
    path.write_text(replace_value(source.read_text(), line_pick, value))
    load_theme_or_refuse(path)


@pytest.mark.skipif(not THEMES, reason="no shipped theme files")
@FUZZ
@given(which=st.integers(0, 10), kind=st.sampled_from(corpus.MUTATIONS), position=st.floats(0, 1, exclude_max=True), size=st.integers(1, 32), seed=st.integers(0, 2**31))
def test_theme_file_with_damaged_bytes(which, kind, position, size, seed):
    source = THEMES[which % len(THEMES)]
    path = fresh(source.name)
    path.write_bytes(corpus.mutate(source.read_bytes(), kind, position, size, seed))
    load_theme_or_refuse(path)


# ---------------------------------------------------------------- defects reported to their owners


@pytest.mark.parametrize("key", ["memory_gib", "cpu_gflops_per_core", "peak_tflops", "memory_bandwidth_gb_per_s"])
@pytest.mark.parametrize("value", PROFILE_INF_VALUES)
def test_hardware_profile_with_an_infinite_figure(key, value):
    source = PROFILES[0]
    path = fresh(source.name)
    path.write_text(re.sub(rf"^{key} = .*$", f"{key} = {value}", source.read_text(), count=1, flags=re.M))
    load_profile_or_refuse(path)


def test_theme_file_that_is_not_utf8():
    path = fresh("ember.toml")
    path.write_bytes(b"\xd8" + THEMES[0].read_bytes())
    load_theme_or_refuse(path)
