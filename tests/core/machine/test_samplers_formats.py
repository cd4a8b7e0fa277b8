"""Parsers and stream decoders for powermetrics, macmon and mactop, on recorded-format samples."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from trainpilot.machine.samplers.power_formats import (
    JsonLinesDecoder,
    PowermetricsDecoder,
    parse_macmon,
    parse_mactop,
    parse_powermetrics_plist,
    parse_powermetrics_text,
)

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "samplers"


def _chunks(data: bytes, size: int) -> list[bytes]:
    return [data[i : i + size] for i in range(0, len(data), size)]


def test_powermetrics_plist_samples() -> None:
    first = (FIXTURES / "powermetrics-plist.bin").read_bytes().split(b"\0")[0]
    snap = parse_powermetrics_plist(first)
    assert snap.source == "powermetrics"
    assert (snap.cpu_w, snap.gpu_w, snap.ane_w) == pytest.approx((3.2152, 0.4127, 1.287))
    assert snap.gpu_active == pytest.approx(1 - 0.5579)


def test_powermetrics_plist_energy_only_divides_by_the_interval() -> None:
    snap = parse_powermetrics_plist((FIXTURES / "powermetrics-plist-energy-only.bin").read_bytes())
    # 250 mJ over 0.5 s is 0.5 W
    assert (snap.cpu_w, snap.gpu_w, snap.ane_w) == pytest.approx((2.2, 0.08, 0.5))
    assert snap.gpu_active == pytest.approx(0.04)


def test_powermetrics_text_uses_the_processor_section_figures() -> None:
    samples = (FIXTURES / "powermetrics-text.txt").read_text().split("*** Sampled system activity")[1:]
    assert len(samples) == 2
    snap = parse_powermetrics_text(samples[0])
    assert (snap.cpu_w, snap.gpu_w, snap.ane_w) == pytest.approx((3.215, 0.412, 1.287))
    assert snap.gpu_active == pytest.approx(0.4421)
    # "GPU Power" repeats in the GPU section; the first (the one summed into Combined) wins
    dup = parse_powermetrics_text("CPU Power: 100 mW\nGPU Power: 50 mW\nANE Power: 0 mW\n\nGPU Power: 9999 mW\n")
    assert (dup.gpu_w, dup.ane_w) == (0.05, 0.0)
    # older releases say "GPU active residency"
    assert parse_powermetrics_text("GPU active residency:  12.50% (389 MHz: 12%)\n").gpu_active == pytest.approx(0.125)


def test_missing_fields_are_none_not_zero() -> None:
    snap = parse_powermetrics_text("CPU Power: 800 mW\n")
    assert snap.ane_w is None and snap.gpu_active is None
    assert parse_macmon({"cpu_power": 1.0}).ane_w is None
    assert parse_mactop({}).cpu_w is None


def test_macmon_current_and_old_formats() -> None:
    lines = (FIXTURES / "macmon-pipe.jsonl").read_text().splitlines()
    snap = parse_macmon(json.loads(lines[0]))
    assert (snap.source, snap.cpu_w, snap.gpu_w, snap.ane_w, snap.gpu_active) == ("macmon", 3.1842, 0.4127, 1.2871, 0.342)
    old = parse_macmon(json.loads((FIXTURES / "macmon-pipe-v0.jsonl").read_text()))
    assert (old.ane_w, old.gpu_active) == (1.1988, 0.3472)


def test_mactop_headless() -> None:
    snap = parse_mactop(json.loads((FIXTURES / "mactop-headless.jsonl").read_text().splitlines()[1]))
    assert (snap.source, snap.cpu_w, snap.gpu_w, snap.ane_w) == ("mactop", 3.01, 0.4, 1.34)
    assert snap.gpu_active == pytest.approx(0.329)


@pytest.mark.parametrize("size", [1, 7, 97, 100_000])
@pytest.mark.parametrize("name", ["powermetrics-plist.bin", "powermetrics-text.txt"])
def test_powermetrics_stream_detects_format_and_splits_samples(name: str, size: int) -> None:
    decoder = PowermetricsDecoder()
    got = []
    for chunk in _chunks((FIXTURES / name).read_bytes(), size):
        got.extend(decoder.feed(chunk))
    got.extend(decoder.flush())
    assert [s.ane_w for s in got] == pytest.approx([1.287, 1.342 if name.endswith(".txt") else 1.3426])


def test_plist_stream_holds_back_an_incomplete_sample_and_skips_damaged_ones() -> None:
    data = (FIXTURES / "powermetrics-plist.bin").read_bytes()
    decoder = PowermetricsDecoder()
    first_end = data.index(b"\0")
    assert decoder.feed(data[: first_end - 10]) == []
    assert len(decoder.feed(data[first_end - 10 : first_end + 1])) == 1
    assert decoder.feed(b"<?xml version='1.0'?><plist><dict><key>broken\0") == []


@pytest.mark.parametrize("name", ["macmon-pipe.jsonl", "mactop-headless.jsonl"])
def test_json_lines_stream_in_odd_chunks(name: str) -> None:
    parse = parse_macmon if name.startswith("macmon") else parse_mactop
    decoder = JsonLinesDecoder(parse)
    got = []
    for chunk in _chunks((FIXTURES / name).read_bytes(), 13):
        got.extend(decoder.feed(chunk))
    assert len(got) == 2 and got[1].ane_w == pytest.approx(1.3426 if name.startswith("macmon") else 1.34)


def test_json_stream_skips_noise_lines_and_array_framing() -> None:
    decoder = JsonLinesDecoder(parse_macmon)
    text = 'Warning: something\n[{"ane_power": 1.5},\n{"ane_power": 2.5}]\n'
    got = decoder.feed(text.encode())
    assert [s.ane_w for s in got] == [1.5, 2.5]
