"""Parsers for the output of Apple Silicon power tools, and stream decoders that cut it into samples.

Formats (see tests/fixtures/samplers/ for recorded-format samples):
- `powermetrics -f plist`: one XML plist per sample, samples separated by a NUL byte. Power keys in
  `processor` are milliwatts (`cpu_power`, `gpu_power`, `ane_power`); older releases only give
  energies in millijoules (`*_energy`) over `elapsed_ns`. `gpu.idle_ratio` gives GPU activity.
- `powermetrics` text: samples start with "*** Sampled system activity"; lines such as
  "ANE Power: 1287 mW". "GPU Power" appears twice (CPU and GPU sections); the first is used.
- `macmon pipe`: one JSON object per line; `cpu_power`/`gpu_power`/`ane_power` in watts; GPU
  activity as `gpu_active_ratio` (0..1) or, before macmon 0.6, `gpu_usage: [MHz, ratio]`.
- `mactop --headless`: one JSON object per line (a JSON array when --count is given); watts in
  `soc_metrics` (`cpu_power`, `gpu_power`, `ane_power`), GPU activity as `gpu_usage` percent.

All of these are model-based estimates from the SoC's energy counters, so readings built from
them are labelled "est.".
"""

from __future__ import annotations

import json
import plistlib
import re
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class PowerSnapshot:
    source: str  # the tool that produced it
    cpu_w: float | None = None
    gpu_w: float | None = None
    ane_w: float | None = None
    gpu_active: float | None = None  # 0..1, share of the interval the GPU was busy


def _num(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def _ratio(value: Any, scale: float = 1.0) -> float | None:
    number = _num(value)
    return None if number is None else max(0.0, min(1.0, number / scale))


# ---------------------------------------------------------------- powermetrics


def parse_powermetrics_plist(document: bytes) -> PowerSnapshot:
    data = plistlib.loads(document.strip(b"\0\n\r\t "))
    processor = data.get("processor", {}) or {}
    elapsed_s = (_num(data.get("elapsed_ns")) or 0.0) / 1e9

    def watts(unit: str) -> float | None:
        milliwatts = _num(processor.get(f"{unit}_power"))
        if milliwatts is not None:
            return milliwatts / 1000.0
        millijoules = _num(processor.get(f"{unit}_energy"))
        if millijoules is not None and elapsed_s > 0:
            return millijoules / 1000.0 / elapsed_s
        return None

    gpu = data.get("gpu", {}) or {}
    idle = _num(gpu.get("idle_ratio"))
    return PowerSnapshot(
        "powermetrics", watts("cpu"), watts("gpu"), watts("ane"), None if idle is None else _ratio(1.0 - idle)
    )


_TEXT_POWER = {key: re.compile(rf"^{key} Power:\s*([\d.]+)\s*mW", re.MULTILINE) for key in ("CPU", "GPU", "ANE")}
_TEXT_GPU_ACTIVE = re.compile(r"^GPU (?:HW )?active residency:\s*([\d.]+)%", re.MULTILINE)
TEXT_SAMPLE_MARK = "*** Sampled system activity"


def parse_powermetrics_text(sample: str) -> PowerSnapshot:
    def watts(key: str) -> float | None:
        match = _TEXT_POWER[key].search(sample)  # first match: the Processor section's figure
        return float(match.group(1)) / 1000.0 if match else None

    active = _TEXT_GPU_ACTIVE.search(sample)
    return PowerSnapshot(
        "powermetrics",
        watts("CPU"),
        watts("GPU"),
        watts("ANE"),
        _ratio(float(active.group(1)), 100.0) if active else None,
    )


# ---------------------------------------------------------------- macmon and mactop


def parse_macmon(record: dict[str, Any]) -> PowerSnapshot:
    active = _ratio(record.get("gpu_active_ratio"))
    if active is None:
        usage = record.get("gpu_usage")  # macmon < 0.6: [frequency MHz, ratio 0..1]
        if isinstance(usage, list) and len(usage) == 2:
            active = _ratio(usage[1])
    return PowerSnapshot(
        "macmon", _num(record.get("cpu_power")), _num(record.get("gpu_power")), _num(record.get("ane_power")), active
    )


def parse_mactop(record: dict[str, Any]) -> PowerSnapshot:
    soc = record.get("soc_metrics", {}) or {}
    active = _ratio(record.get("gpu_usage"), 100.0)
    if active is None:
        active = _ratio((record.get("gpu_metrics") or {}).get("active_percent"), 100.0)
    return PowerSnapshot(
        "mactop", _num(soc.get("cpu_power")), _num(soc.get("gpu_power")), _num(soc.get("ane_power")), active
    )


# ---------------------------------------------------------------- stream decoders


class Decoder(ABC):
    """Cuts a tool's byte stream into samples. feed() returns the samples completed so far."""

    @abstractmethod
    def feed(self, chunk: bytes) -> list[PowerSnapshot]:
        """Take the next bytes of the stream; return the samples they completed."""

    def flush(self) -> list[PowerSnapshot]:
        """At end of stream: whatever complete sample is left."""
        return []


# A line that is not JSON (a warning a tool printed) is dropped once this much is buffered behind it.
_MAX_BUFFER = 1 << 20


class JsonLinesDecoder(Decoder):
    """JSON objects, one per line or inside a streamed array ("[", "," and "]" are skipped)."""

    def __init__(self, parse: Callable[[dict[str, Any]], PowerSnapshot]):
        self.parse = parse
        self.buffer = ""
        self.decoder = json.JSONDecoder()

    def feed(self, chunk: bytes) -> list[PowerSnapshot]:
        self.buffer += chunk.decode("utf-8", errors="replace")
        out: list[PowerSnapshot] = []
        while True:
            text = self.buffer.lstrip(" \t\r\n,[]")
            if not text:
                self.buffer = ""
                return out
            if not text.startswith("{"):  # noise: skip to the next line, if it has arrived
                newline = text.find("\n")
                self.buffer = text[newline + 1 :] if newline >= 0 else text
                if newline < 0:
                    return out
                continue
            try:
                record, end = self.decoder.raw_decode(text)
            except json.JSONDecodeError:
                newline = text.find("\n")
                if len(text) > _MAX_BUFFER and newline >= 0:
                    self.buffer = text[newline + 1 :]
                    continue
                self.buffer = text  # incomplete: wait for more
                return out
            self.buffer = text[end:]
            if isinstance(record, dict):
                out.append(self.parse(record))


class PowermetricsDecoder(Decoder):
    """powermetrics in either output format, detected from its first bytes."""

    def __init__(self) -> None:
        self.buffer = b""
        self.mode: str | None = None

    def feed(self, chunk: bytes) -> list[PowerSnapshot]:
        self.buffer += chunk
        if self.mode is None:
            head = self.buffer.lstrip(b"\0\r\n\t ")
            if len(head) < 5:
                return []
            self.mode = "plist" if head.startswith(b"<?xml") or head.startswith(b"<plist") else "text"
        return self._plist() if self.mode == "plist" else self._text(final=False)

    def flush(self) -> list[PowerSnapshot]:
        if self.mode == "text":
            return self._text(final=True)
        if self.mode == "plist" and self.buffer.strip(b"\0\r\n\t "):
            self.buffer += b"\0"
            return self._plist()
        return []

    def _plist(self) -> list[PowerSnapshot]:
        *documents, self.buffer = self.buffer.split(b"\0")
        out = []
        for document in documents:
            if document.strip():
                try:
                    out.append(parse_powermetrics_plist(document))
                except Exception:  # a damaged sample is skipped, the stream goes on
                    continue
        return out

    def _text(self, final: bool) -> list[PowerSnapshot]:
        text = self.buffer.decode("utf-8", errors="replace")
        parts = text.split(TEXT_SAMPLE_MARK)
        # parts[0] is the header before the first sample; the last part may still be arriving
        complete = parts[1:] if final else parts[1:-1]
        keep = "" if final else (TEXT_SAMPLE_MARK + parts[-1] if len(parts) > 1 else parts[0])
        self.buffer = keep.encode("utf-8")
        return [parse_powermetrics_text(part) for part in complete]
