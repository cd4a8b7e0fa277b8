"""Every human format of a figure, in one place: times, sizes, counts, shares, errors. Messages
in the core and the CLI use the spaced forms ("2 min 05 s", "1.2 GB"); the app's narrow panels
the compact ones ("2m05s", "1.1 GiB"), which are the same figures at the width a panel has."""

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


def seconds_compact(value: float | None) -> str:
    """0.0184 -> '18ms', 3.2 -> '3.20s', 75 -> '1m15s'. None -> 'n/a' (unknown is never shown as 0)."""
    if value is None:
        return "n/a"
    if value < 0:
        return "-" + seconds_compact(-value)
    if value < 0.001:
        return f"{value * 1e6:.0f}µs"
    if value < 0.01:
        return f"{value * 1000:.1f}ms"
    if value < 1:
        return f"{value * 1000:.0f}ms"
    if value < 10:
        return f"{value:.2f}s"
    if value < 60:
        return f"{value:.1f}s"
    if value < 3600:
        minutes, rest = divmod(int(round(value)), 60)
        return f"{minutes}m{rest:02d}s"
    hours, rest = divmod(int(round(value)), 3600)
    return f"{hours}h{rest // 60:02d}m"


def seconds_range_compact(value: float | None, low: float | None, high: float | None) -> str:
    """`seconds_range` where there is an interval, else `seconds_compact`."""
    if value is None or low is None or high is None:
        return seconds_compact(value)
    return seconds_range(value, low, high)


def bytes_decimal(n: float) -> str:
    """1.23e9 -> '1.23 GB' (decimal units, as disks and memory errors are read)."""
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= size:
            return f"{n / size:.3g} {unit}"
    return f"{int(n)} B"


def bytes_binary(nbytes: float) -> str:
    """Binary units, three significant figures at most: '512 MiB', '6.2 GiB'."""
    value = float(nbytes)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            return f"{value:.0f} {unit}" if value >= 100 or unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def fraction(value: float | None) -> str:
    """0.172 -> '17%'."""
    return "n/a" if value is None else f"{value * 100:.0f}%"


def relative_error(predicted: float | None, actual: float | None) -> str:
    """How far the actual time landed from the prediction: '+53%' means it took 53 % longer."""
    if predicted is None or actual is None or predicted <= 0:
        return "n/a"
    return f"{(actual - predicted) / predicted * 100:+.0f}%"


def predicted(value: float | None, bounds: dict | None) -> str:
    """`seconds_range` from a prediction's detail["interval"] (interval.py): its low_s / high_s."""
    bounds = bounds or {}
    return seconds_range(value, bounds.get("low_s"), bounds.get("high_s"))
