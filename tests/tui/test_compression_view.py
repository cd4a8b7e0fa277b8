"""The compression view on a real, tiny compression job: the worker's events reach the bars, the
chart and the verdict; a refused input shows its one line; the main app opens the view with `x`."""
from __future__ import annotations

import pytest

from trainpilot.compress import CompressConfig
from trainpilot.job.data import demo_dataset
from trainpilot_tui.app.compress_app import CompressionApp
from trainpilot_tui.app.widgets.sparsity_bars import SparsityBars
from trainpilot_tui.app.widgets.tradeoff_chart import TradeoffChart

from .conftest import wait_until

SIZE = (80, 24)


@pytest.fixture(scope="module")
def dataset():  # type: ignore[no-untyped-def]
    return demo_dataset(400, seed=2)


def tiny(dataset, **kw):  # type: ignore[no-untyped-def]
    base = dict(model="small_cnn", dataset=dataset, episodes=3, search_seconds=0.0, threads=1, batch_size=32, dense_epochs=2, finetune_steps=2,
                deploy_epochs=0.5, search_repeats=2, deploy_repeats=6, target_speedup=1.1, max_accuracy_drop=100.0,
                export=False, predict_on=("apple-m2",))
    base.update(kw)
    return CompressConfig(**base)


async def test_the_view_follows_a_real_job_at_80x24(dataset) -> None:  # type: ignore[no-untyped-def]
    app = CompressionApp(tiny(dataset, max_accuracy_drop=5.0))  # 60 test samples cannot resolve 5 points
    async with app.run_test(size=SIZE) as pilot:
        view = app.screen_view
        await wait_until(pilot, lambda: view.report is not None or view.problem is not None, timeout=120, what="the job to finish")
        assert view.problem is None
        await pilot.pause()
        chart = view.query_one(TradeoffChart)
        assert len(chart.points) == 3 and chart.label == "measured" and chart.threshold is not None
        bars = view.query_one(SparsityBars)
        assert [b.name for b in bars.rows] == ["features.0", "features.3"]
        assert tuple(b.kept for b in bars.rows) == tuple(view.report.tuned.pruned.kept.values())
        verdict = str(view.query_one("#verdict").render())
        assert ("deployed" in verdict) and "predicted: apple-m2" in verdict
        data = view.report.to_dict()
        assert f"[{data['accuracy_drop_low']:.2f}, {data['accuracy_drop_high']:.2f}] 95%" in verdict
        assert f"{data['chosen_kind']}, point rule" in verdict
        assert f"measured {data['speedup_measured']:.2f}x [{data['speedup_low']:.2f}, {data['speedup_high']:.2f}] 95%" in verdict
        notice = view.query_one("#notice")
        assert notice.display and "too small to resolve a 5-point drop: on 60 test samples" in str(notice.render())
        assert "accuracy vs measured speed-up (3 tried)" in str(chart.render())
        # the job's thread posts its report, then returns: its worker finishes a moment later
        await wait_until(pilot, lambda: all(w.is_finished for w in view.workers), timeout=10, what="the job's worker to end")


async def test_a_refused_model_shows_the_reason(dataset) -> None:  # type: ignore[no-untyped-def]
    app = CompressionApp(tiny(dataset, model="rnn"))
    async with app.run_test(size=SIZE) as pilot:
        view = app.screen_view
        await wait_until(pilot, lambda: view.problem is not None, timeout=60, what="the refusal")
        await pilot.pause()
        assert "recurrent layers (LSTM)" in str(view.query_one("#verdict").render())
