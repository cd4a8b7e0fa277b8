"""The app paints half as often while the run's plan trains on every core (the app's
own frames preempt a training thread, and the others wait for it), says so, and goes back
to its rate when a core is free again; a rate the user chose is kept."""
from __future__ import annotations

import threading

from trainpilot.plans import Plan
from trainpilot_tui.app.pace import Pace, cpu_threads, holds_every_core
from trainpilot_tui.app.sampling import live_samples

from .conftest import scripted_app, wait_until
from .scripted import SessionFactory

SIZE = (120, 40)


def test_which_plans_hold_every_core() -> None:
    assert holds_every_core(Plan("cpu", threads=2), cpus=2)
    assert holds_every_core(Plan("cpu", threads=4), cpus=2)  # oversubscribed: even more so
    assert not holds_every_core(Plan("cpu", threads=1), cpus=2)
    assert holds_every_core(Plan("cpu"), cpus=8)  # no thread count: PyTorch takes every CPU
    assert not holds_every_core(Plan("cuda", device="cuda:0"), cpus=2)  # its host thread waits on the device
    split = Plan.split([Plan("cpu", threads=1), Plan("cuda", device="cuda:0")])
    assert cpu_threads(split, 2) == 1 and not holds_every_core(split, cpus=2)
    assert holds_every_core(Plan.split([Plan("cpu", threads=1), Plan("cpu", threads=1)]), cpus=2)


def test_the_pace_stretches_for_a_busy_plan_and_only_when_adaptive() -> None:
    pace = Pace(1.0)
    assert (pace.interval_s, pace.figures_interval_s, pace.busy) == (1.0, 4.0, False)
    assert pace.interval_for(Plan("cpu", threads=2), cpus=2) == 2.0 and pace.interval_s == 1.0  # asked, not set
    assert pace.follow(Plan("cpu", threads=2), cpus=2)
    assert (pace.interval_s, pace.figures_interval_s, pace.busy) == (2.0, 8.0, True)
    assert not pace.follow(Plan("cpu", threads=2), cpus=2)  # no change, nothing to apply
    assert pace.follow(Plan("cpu", threads=1), cpus=2) and pace.interval_s == 1.0
    assert pace.follow(Plan("cpu", threads=2), cpus=2) and pace.follow(None) and pace.interval_s == 1.0
    fixed = Pace(2.5, adaptive=False)
    assert not fixed.follow(Plan("cpu", threads=2), cpus=2) and fixed.interval_s == 0.4 and not fixed.busy


def test_live_samples_ask_a_callable_interval_before_each_wait() -> None:
    asked: list[int] = []
    stop = threading.Event()

    def interval() -> float:
        asked.append(1)
        return 0.01

    samples = live_samples(interval, stop)
    next(samples), next(samples)
    stop.set()
    assert len(asked) == 2


async def test_the_app_slows_while_the_run_holds_every_core_and_says_so(factory: SessionFactory) -> None:
    app = scripted_app(factory)  # the scripted plan: cpu, 2 threads; conftest pins 2 CPUs
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(pilot, lambda: factory.sessions and factory.last.held_at == (1, 3), what="the hold")
        await wait_until(pilot, lambda: app.pace.busy, what="the pace to follow the plan")
        assert app.main.progress_interval_s == 2.0 and app.main.figures_interval_s == 8.0
        assert app.main.hardware_panel.border_subtitle == "refresh 2 s: all cores train"
        await wait_until(pilot, lambda: "app refresh every 2 s, not 1 s: the run trains on every core" in app.main.agent_panel.text)
        await pilot.press("c")  # the chooser: move to one thread, which leaves a core free
        await pilot.pause()
        app.action_override("cpu", threads=1)
        await wait_until(pilot, lambda: not app.pace.busy, what="the pace to return")
        await wait_until(pilot, lambda: "app refresh every 1 s again: a core is free" in app.main.agent_panel.text)
        assert app.main.hardware_panel.border_subtitle == ""
        factory.last.proceed()
        await wait_until(pilot, lambda: not app.running, what="the run to finish")


async def test_a_rate_the_user_chose_is_kept_whatever_the_plan(factory: SessionFactory) -> None:
    app = scripted_app(factory, refresh_hz=2.0)
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(pilot, lambda: factory.sessions and factory.last.held_at == (1, 3), what="the hold")
        await wait_until(pilot, lambda: app.main.run_panel.plan == Plan("cpu", threads=2))
        assert app.main.progress_interval_s == 0.5 and not app.pace.busy
        assert "app refresh" not in app.main.agent_panel.text
        factory.last.proceed()
        await wait_until(pilot, lambda: not app.running, what="the run to finish")
