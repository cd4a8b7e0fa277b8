"""Human-readable figures for the screen. One place, so every panel writes times and sizes alike."""
from __future__ import annotations


def seconds(value: float | None) -> str:
    """0.0184 -> '18ms', 3.2 -> '3.20s', 75 -> '1m15s'. None -> 'n/a' (unknown is never shown as 0)."""
    if value is None:
        return "n/a"
    if value < 0:
        return "-" + seconds(-value)
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


def size(nbytes: float) -> str:
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


def error(predicted: float | None, actual: float | None) -> str:
    """How far the actual time landed from the prediction: '+53%' means it took 53 % longer."""
    if predicted is None or actual is None or predicted <= 0:
        return "n/a"
    return f"{(actual - predicted) / predicted * 100:+.0f}%"


def seconds_range(value: float | None, low: float | None, high: float | None) -> str:
    """A predicted time with its 80 % interval, '2.0 s (1.8–2.3)'; without one, as `seconds`."""
    if value is None or low is None or high is None:
        return seconds(value)
    from trainpilot.units import seconds_range as core_range

    return core_range(value, low, high)
