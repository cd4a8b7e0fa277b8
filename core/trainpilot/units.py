"""Human-readable figures, shared by messages in the core and the UIs."""
from __future__ import annotations


def seconds(value: float | None) -> str:
    """0.042 -> '42 ms', 3.14159 -> '3.1 s', 125 -> '2 min 05 s'; None -> 'n/a'."""
    if value is None:
        return "n/a"
    if value < 1.0:
        return f"{value * 1000:.0f} ms"
    if value < 120:
        return f"{value:.1f} s"
    minutes, secs = divmod(int(round(value)), 60)
    return f"{minutes} min {secs:02d} s"


def count(value: int) -> str:
    """20490 -> '20.5k', 2913290 -> '2.91M'."""
    for unit, size in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(value) >= size:
            return f"{value / size:.3g}{unit}"
    return str(value)
