"""What an energy figure is: joules plus where they came from, so a figure is never shown
without saying whether it was measured (RAPL, NVML) or estimated from power figures ("est.")."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

EST = "est."  # the label every estimated figure carries, in text and in `energy_source`


@dataclass(frozen=True)
class Energy:
    joules: float | None  # None only when nothing could be read at all
    source: str  # "measured: RAPL package", "est.: 5.0 W per busy core x CPU time", ...
    estimated: bool = False

    @classmethod
    def recorded(cls, joules: float | None, source: str | None) -> Energy:
        """A figure read back (history, JSON, an event): estimated unless its source says measured."""
        text = source or "not metered"
        return cls(joules, text, estimated=not text.startswith("measured") or EST in text)

    @property
    def text(self) -> str:
        """'12.3 J' measured, '12.3 J est.' estimated, 'n/a: why' when there is no figure."""
        if self.joules is None:
            return f"n/a: {self.source}"
        return joules_text(self.joules) + (f" {EST}" if self.estimated else "")

    def to_dict(self) -> dict[str, Any]:
        return {"energy_j": self.joules, "energy_source": self.source}

    def __add__(self, other: Energy) -> Energy:
        """Two parts of one machine (the CPU package and a GPU): the sum is estimated if either is."""
        if self.joules is None or other.joules is None:
            return self if other.joules is None else other
        source = self.source if self.source == other.source else _join(self.source, other.source)
        return Energy(self.joules + other.joules, source, self.estimated or other.estimated)


def _join(a: str, b: str) -> str:
    """'measured: RAPL package' + 'measured: NVML energy counter' -> 'measured: RAPL package + NVML energy counter'."""
    head_a, _, rest_a = a.partition(": ")
    head_b, _, rest_b = b.partition(": ")
    if head_a == head_b and rest_a and rest_b:
        return f"{head_a}: {rest_a} + {rest_b}"
    return f"{a} + {b}"


def joules_text(value: float) -> str:
    """12.34 -> '12.3 J', 4321 -> '4.32 kJ', 0.5 -> '0.50 J'."""
    if abs(value) >= 1e6:
        return f"{value / 1e6:.3g} MJ"
    if abs(value) >= 1e3:
        return f"{value / 1e3:.3g} kJ"
    return f"{value:.1f} J" if abs(value) >= 10 else f"{value:.2f} J"


@dataclass(frozen=True)
class Watts:
    """A plan's predicted average power, with where the figure came from."""

    watts: float
    source: str
    estimated: bool = True

    @property
    def text(self) -> str:
        return f"{self.watts:.1f} W" + (f" {EST}" if self.estimated else "")
