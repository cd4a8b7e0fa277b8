"""Linux RAPL energy counters, read from the powercap sysfs tree (/sys/class/powercap).

Each CPU package is a zone `intel-rapl:N` (AMD Zen exposes the same tree) with `name`
("package-0"), `energy_uj` (microjoules since some start, wrapping to 0 at `max_energy_range_uj`)
and subzones `intel-rapl:N:M` ("core", "uncore", "dram"). The package zones are summed; "dram"
subzones are added because a package does not count its memory; "core"/"uncore" are inside the
package and "psys" (a laptop's whole platform) overlaps it, so neither is added. The
`intel-rapl-mmio` tree repeats the package zone through another interface and is skipped.

The counter wraps (a 262 kJ range lasts about 9 minutes at 500 W), so `RaplEnergy` reads it often
enough to see at most one wrap between reads and adds `max_energy_range_uj` back when a reading
went down. The reader takes the tree's root, so the same code reads a test's fake tree.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path

from trainpilot.plans import Availability

POWERCAP_ROOT = Path("/sys/class/powercap")
ASSUMED_MAX_W = 1000.0  # a generous ceiling for one machine's packages: sets how often to read


@dataclass(frozen=True)
class RaplZone:
    path: Path
    name: str  # "package-0", "dram"
    max_range_uj: int

    def read_uj(self) -> int:
        return int((self.path / "energy_uj").read_text().strip())


def _read_zone(path: Path) -> RaplZone | None:
    try:
        name = (path / "name").read_text().strip()
        max_range = int((path / "max_energy_range_uj").read_text().strip())
    except (OSError, ValueError):
        return None
    return RaplZone(path, name, max_range) if max_range > 0 else None


def find_zones(root: Path | str = POWERCAP_ROOT) -> list[RaplZone]:
    """The package zones and their dram subzones under `root`, in a stable order."""
    root = Path(root)
    zones: list[RaplZone] = []
    for top in sorted(root.glob("intel-rapl:*")):
        if top.name.count(":") != 1:
            continue  # a subzone listed at the top level (sysfs links them there too)
        zone = _read_zone(top)
        if zone is None or not zone.name.startswith("package"):
            continue  # psys overlaps the packages; an unreadable zone is skipped
        zones.append(zone)
        for sub in sorted(top.glob(f"{top.name}:*")):
            part = _read_zone(sub)
            if part is not None and part.name == "dram":
                zones.append(part)
    return zones


def rapl_availability(root: Path | str = POWERCAP_ROOT) -> Availability:
    root = Path(root)
    if not root.is_dir():
        return Availability(False, f"no {root} (a kernel without powercap, or a VM or container that hides RAPL)")
    zones = find_zones(root)
    if not zones:
        return Availability(False, f"no RAPL package zone under {root}")
    try:
        zones[0].read_uj()
    except PermissionError:
        return Availability(False, f"{zones[0].path / 'energy_uj'} is readable by root only here")
    except (OSError, ValueError) as exc:
        return Availability(False, f"cannot read {zones[0].path / 'energy_uj'} ({exc})")
    return Availability(True)


def counter_delta(before: int, after: int, max_range: int) -> int:
    """Microjoules between two readings of one counter that wraps to 0 at `max_range`."""
    if after >= before:
        return after - before
    return max_range - before + after


class RaplEnergy:
    """An energy source (see meter.py): joules of every package (and dram) zone since creation."""

    estimated = False

    def __init__(self, root: Path | str = POWERCAP_ROOT):
        self.zones = find_zones(root)
        if not self.zones:
            raise OSError(rapl_availability(root).reason)
        parts = "package" + ("+dram" if any(z.name == "dram" for z in self.zones) else "")
        self.source = f"measured: RAPL {parts}"
        # At most one wrap between reads: the smallest range at the assumed ceiling, with a margin.
        self.poll_interval_s = max(0.05, min(30.0, min(z.max_range_uj for z in self.zones) / 1e6 / ASSUMED_MAX_W / 4))
        self._lock = threading.Lock()
        self._last = [z.read_uj() for z in self.zones]
        self._total_uj = 0

    def read_j(self) -> float:
        with self._lock:
            for i, zone in enumerate(self.zones):
                now = zone.read_uj()
                self._total_uj += counter_delta(self._last[i], now, zone.max_range_uj)
                self._last[i] = now
            return self._total_uj / 1e6

    def close(self) -> None:
        pass
