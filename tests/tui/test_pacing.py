"""The screen paints a burst of per-epoch events in one go, not one frame per event.

A small model runs several epochs a second, each with an agent step and a checkpoint; painting each
as it came took the app to ~48 frames a second and a third of a core, which the training it shows
then lacked (benchmarks/tui_overhead.py). The scripted session here yields 30 epochs without
waiting: every epoch and every trace line must still arrive, in the core's order, in a few paints.
"""
from __future__ import annotations

from typing import Any

from trainpilot_tui.app.widgets.epoch_table import EpochTable

from .conftest import scripted_app, wait_until
from .scripted import SessionFactory

EPOCHS = 30


async def test_a_burst_of_epochs_is_painted_in_a_few_batches_in_order(monkeypatch: Any) -> None:
    shows: list[int] = []
    original = EpochTable.show

    def counting(self: EpochTable, epochs: Any) -> None:
        shows.append(len(epochs))
        original(self, epochs)

    monkeypatch.setattr(EpochTable, "show", counting)
    factory = SessionFactory()
    app = scripted_app(factory, epochs=EPOCHS, samples=0)  # no hardware samples: the fallback timer paints
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_until(pilot, lambda: app.last_status is not None, timeout=30, what="the run to end")
        await pilot.pause()
        panel = app.main.run_panel
        assert [e.epoch for e in panel.epochs] == list(range(1, EPOCHS + 1))
        assert panel.state == "success"
        # every epoch's "learn" line arrives, in the core's order
        text = app.main.agent_panel.text
        at = [text.index(f"epoch {n}: predicted") for n in range(1, EPOCHS + 1)]
        assert at == sorted(at)
    shown = [n for n in shows if n]
    assert shown[-1] == EPOCHS
    assert len(shown) <= 5, f"{len(shown)} paints of the epoch table for {EPOCHS} epochs: {shown}"
