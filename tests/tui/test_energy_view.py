"""The screen's energy figures: the epoch table's Energy column and the trace's epoch line."""
from __future__ import annotations

from trainpilot import events as ev
from trainpilot.plans import Plan
from trainpilot_tui.app.trace import entries_for
from trainpilot_tui.app.widgets.epoch_table import epoch_rows, has_energy

CPU1 = Plan("cpu", threads=1)
EST = "est.: 5 W per busy core (generic figure) x CPU time"


def epoch(n: int, joules: float | None, source: str | None = EST) -> ev.EpochTimed:
    return ev.EpochTimed("r", n, 1.0, 0.5, 0.4, 1.0, 1.1, CPU1, (), energy_j=joules, energy_source=source, at=0.0)


def test_epoch_table_gets_an_energy_column_only_when_metered() -> None:
    plain = (epoch(1, None, None),)
    assert not has_energy(plain) and len(epoch_rows(plain)[0]) == 8
    metered = (epoch(1, 12.34), epoch(2, 10.0))
    rows = epoch_rows(metered)
    assert [str(r[-1]) for r in rows] == ["12.3 J est.", "10.0 J est.", "22.3 J est."]
    assert len(epoch_rows(metered, compact=True)[0]) == 6  # an 80-column terminal keeps its figures
    measured = epoch_rows((epoch(1, 4.2, "measured: RAPL package"),))
    assert str(measured[0][-1]) == "4.20 J"


def test_trace_epoch_line_says_the_energy_and_its_label() -> None:
    assert entries_for(epoch(1, 12.34))[0].text.endswith("; 12.3 J est.")
    assert "J" not in entries_for(epoch(1, None, None))[0].text.split("loss")[-1]
