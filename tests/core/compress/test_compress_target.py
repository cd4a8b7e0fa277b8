"""The configuration determiner: this machine measured, a described one predicted, and which
sparsity patterns pay where, with a source."""
from __future__ import annotations

from pathlib import Path

import pytest

from trainpilot.compress.target import SEMI_2_4, STRUCTURED, UNSTRUCTURED, resolve_compression_target
from trainpilot.errors import ConfigError
from trainpilot.machine.target_profiles import load_target, shipped_profiles


def test_this_machine_counts_structured_pruning_only() -> None:
    target = resolve_compression_target(None)
    assert target.cycles_label == "measured" and not target.is_described
    assert target.pays(STRUCTURED) and not target.pays(UNSTRUCTURED)
    assert all(p.source for p in target.patterns)


def test_described_profiles_say_what_pays_with_sources() -> None:
    gpu = resolve_compression_target("linux-cuda-rtx4090")
    assert gpu.cycles_label == "predicted" and gpu.pays(STRUCTURED) and gpu.pays(SEMI_2_4) and not gpu.pays(UNSTRUCTURED)
    mac = resolve_compression_target("apple-m2")
    assert mac.is_apple and mac.pays(STRUCTURED) and not mac.pays(SEMI_2_4)
    assert "coremltools" in next(p.source for p in mac.patterns if p.pattern == STRUCTURED)


def test_a_bad_compression_section_names_the_file(tmp_path: Path) -> None:
    text = shipped_profiles()["apple-m2"].read_text()
    bad = tmp_path / "bad.toml"
    bad.write_text(text.replace('patterns = ["structured"]', 'patterns = ["magic"]'))
    with pytest.raises(ConfigError, match="bad.toml: 'patterns' in \\[compression\\]"):
        load_target(bad)
