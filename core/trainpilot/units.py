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


def seconds_range(value: float | None, low: float | None, high: float | None) -> str:
    """A predicted time with its interval, in the value's unit: 2.0 s (1.8–2.3), 420 ms (380–470)."""
    if value is None or low is None or high is None:
        return seconds(value)
    if value < 1.0:
        return f"{value * 1000:.0f} ms ({low * 1000:.0f}–{high * 1000:.0f})"
    if value < 120:
        return f"{value:.1f} s ({low:.1f}–{high:.1f})"
    return f"{seconds(value)} ({seconds(low)}–{seconds(high)})"


def predicted(value: float | None, bounds: dict | None) -> str:
    """`seconds_range` from a prediction's detail["interval"] (interval.py): its low_s / high_s."""
    bounds = bounds or {}
    return seconds_range(value, bounds.get("low_s"), bounds.get("high_s"))
