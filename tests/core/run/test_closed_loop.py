"""The closed loop on real runs beside a real busy process: a load that arrives moves the run to
fewer threads and its leaving moves it back; a quiet run is left alone; the loss does not notice
the moves; an override pins the plan and a release hands it back; a moved run resumes.

Every wait is for an event (a move, a plan), never for a duration: the run is long enough to get
there on a slow machine, and the test stops it as soon as it has seen what it asserts.
"""
from __future__ import annotations

import pytest

from trainpilot import events as ev
from trainpilot.machine.contention import BusyLoad
from trainpilot.machine.probe import usable_cpus
from trainpilot.run.session import SessionConfig, TrainingSession

CORES = usable_cpus()
pytestmark = pytest.mark.skipif(CORES < 2, reason="a thread count to move between needs two cores")


GIVE_UP = 40  # epochs (~25 s here): a run that has not shown the state by then stops, and the test says why


def long_run(**options) -> TrainingSession:
    """large_dense on the demo set: ~20 ms steps, and 2 threads ~3x slower beside a busy core."""
    config = dict(model="large_dense", epochs=200, record_history=False)
    config.update(options)
    return TrainingSession(SessionConfig(**config))


def describe(event) -> str:
    if isinstance(event, ev.BackendChosen):
        return f"chosen {event.plan.label} ({event.source}, {event.trigger})"
    return f"{event.phase} {event.text}"


def replans(events, trigger=None):
    return [e for e in events if isinstance(e, ev.BackendChosen) and e.source == "replan" and (trigger is None or e.trigger == trigger)]


def settled(session) -> bool:
    """The agent knows the plan's pace and tries nothing: a load that arrives now is a change from
    that pace's load, not part of the base it is still measuring."""
    loop = session.adapt
    return loop.trial is None and loop.pace is not None and loop.tried


def busy_core_scenario():
    """One run: the load arrives on the agent's idle plan, leaves once the agent has answered it,
    and the run stops once the agent has answered that too (or at GIVE_UP)."""
    session = long_run()
    session.override_backend("cpu", threads=CORES)  # start on every thread, the agent's idle choice here ...
    session.release()  # ... and hand it straight back: the agent owns the run from the first step
    seen: list[ev.Event] = []
    load: BusyLoad | None = None
    loaded = False
    moved_off = moved_back = None
    try:
        for event in session.events():
            seen.append(event)
            if isinstance(event, ev.EpochTimed) and event.epoch >= GIVE_UP:
                session.request_stop("test gave up")
            if (
                isinstance(event, ev.EpochTimed)
                and load is None
                and moved_off is None
                and event.epoch >= 3
                and session.plan.threads == CORES  # the load arrives on the agent's idle plan ...
                and settled(session)  # ... once its pace is known (a near tie it tried is over)
            ):
                load, loaded = BusyLoad(max(1, CORES - 1), settle_s=0).__enter__(), True
            if isinstance(event, ev.BackendChosen) and event.source == "replan" and event.trigger == "load":
                if moved_off is None and load is not None:
                    moved_off = event
                    load.stop()  # the load leaves once the agent has answered it
                elif moved_off is not None:
                    moved_back = event
                    session.request_stop("test saw both moves")
    finally:
        if load is not None:
            load.stop()
    return session, seen, loaded, moved_off, moved_back


def test_a_busy_core_moves_the_run_to_fewer_threads_and_its_leaving_moves_it_back():
    # A real busy process on a shared 2-core machine: one run in a few meets a burst from elsewhere
    # that hides a change. A second run settles it; both failing is a failure, with the trace.
    for _attempt in range(2):
        _session, seen, loaded, moved_off, moved_back = busy_core_scenario()
        if moved_off is not None and moved_back is not None:
            break
    if not loaded and moved_off is None:
        pytest.skip("other work kept this machine busy: the agent never ran on every thread to be moved off it")
    trace = "\n".join(describe(e) for e in seen if isinstance(e, (ev.AgentStepped, ev.BackendChosen)))
    assert moved_off is not None, trace
    assert moved_off.plan.threads < CORES
    assert moved_back is not None and moved_back.plan.threads == CORES, trace
    result = seen[-1].result
    rows = [c for c in result["plan_changes"] if c.get("trigger") == "load"]
    assert len(rows) >= 2 and all(c["source"] == "replan" and c["reason"] for c in rows)
    assert all(isinstance(c["at_epoch"], int) and isinstance(c["at_step"], int) for c in rows)
    texts = [e.text for e in seen if isinstance(e, ev.AgentStepped)]
    assert any(t.startswith("other processes now use") for t in texts)
    assert any(t.startswith("moving to") for t in texts)


def test_a_quiet_run_never_moves_on_load_or_pace():
    session = long_run(epochs=5)
    events = list(session.events())
    assert events[-1].status == "success"
    assert not replans(events, "load") and not replans(events, "pace")
    changes = events[-1].result["plan_changes"]
    assert all(c.get("trigger") in (None, "verify") for c in changes)


def test_adapt_off_says_so_and_never_moves():
    session = long_run(epochs=2, adapt="off")
    events = list(session.events())
    assert any(isinstance(e, ev.AgentStepped) and "adaptation off (--adapt off)" in e.text for e in events)
    assert not replans(events)


def test_the_losses_across_agent_moves_match_an_unmoved_run():
    moved = long_run(epochs=4)
    moved.override_backend("cpu", threads=CORES)
    moved.release()
    events: list[ev.Event] = []
    with BusyLoad(max(1, CORES - 1), settle_s=0):
        for event in moved.events():
            events.append(event)
    result = events[-1].result
    assert result["status"] == "success"
    if not replans(events):
        pytest.skip("the agent did not move this run (the load came and went before it could): nothing to compare")

    def losses(threads: int) -> list[float]:
        config = SessionConfig(model="large_dense", epochs=4, record_history=False, adapt="off", threads=threads)
        out = list(TrainingSession(config).events())[-1].result
        assert out["status"] == "success"
        return [e["loss"] for e in out["epochs"]]

    # The float tolerance is the machine's own: 1 and 2 threads add in another order, and the runs
    # drift apart by rounding alone. A move must stay within that, never follow another trajectory.
    one, every = losses(1), losses(CORES)
    rounding = max(abs(a - b) / abs(b) for a, b in zip(one, every))
    got = [e["loss"] for e in result["epochs"]]
    assert got == pytest.approx(every, rel=max(3 * rounding, 1e-5))


def test_an_override_pins_the_plan_under_load_and_a_release_hands_it_back():
    session = long_run()
    session.override_backend("cpu", threads=CORES)
    seen: list[ev.Event] = []
    load: BusyLoad | None = None
    released = False
    epochs_loaded = 0
    try:
        for event in session.events():
            seen.append(event)
            if isinstance(event, ev.EpochTimed):
                if event.epoch >= GIVE_UP:
                    session.request_stop("test gave up")
                if load is None and event.epoch >= 2:
                    load = BusyLoad(max(1, CORES - 1), settle_s=0).__enter__()
                elif load is not None and not released:
                    epochs_loaded += 1
                    if epochs_loaded >= 3:  # long beside the load that an unpinned agent would have moved
                        assert not replans(seen)
                        released = True
                        session.release()
            if isinstance(event, ev.BackendChosen) and event.source == "replan":
                session.request_stop("test saw the agent take the run back")
    finally:
        if load is not None:
            load.stop()
    texts = [e.text for e in seen if isinstance(e, ev.AgentStepped)]
    assert any("pinned by your override" in t for t in texts)
    assert any("you handed the run back" in t for t in texts)
    moves = replans(seen)
    # handed back under the load, the agent takes the run off the busy core: on the release itself,
    # or, where its prediction calls the plans a near tie, by trying the fewer threads on real steps
    assert moves and moves[0].trigger in ("release", "verify") and moves[0].plan.threads < CORES, [describe(e) for e in moves]


def moved_run() -> tuple[list[ev.Event], bool]:
    """(the events of a run the agent moved off a core that became busy, or gave up on; whether the
    load ever arrived: it waits for the agent to know the plan's pace)."""
    session = long_run()
    session.override_backend("cpu", threads=CORES)
    session.release()
    events: list[ev.Event] = []
    load: BusyLoad | None = None
    try:
        for event in session.events():
            events.append(event)
            if isinstance(event, ev.EpochTimed) and load is None and session.plan.threads == CORES and settled(session):
                load = BusyLoad(max(1, CORES - 1), settle_s=0).__enter__()  # a change from a settled pace
            if isinstance(event, ev.BackendChosen) and event.source == "replan" and event.trigger in ("load", "pace"):
                if event.plan.threads < CORES:
                    session.request_stop("test: stop after the move")
            if isinstance(event, ev.EpochTimed) and event.epoch >= GIVE_UP:
                session.request_stop("test gave up")
    finally:
        if load is not None:
            load.stop()
    return events, load is not None


def test_a_run_moved_by_the_agent_resumes_and_observes_again():
    # As the busy-core test: a burst from elsewhere can hide the change once; a second run settles it.
    for _attempt in range(2):
        events, loaded = moved_run()
        first = events[-1].result
        if any(c["source"] == "replan" for c in first["plan_changes"]):
            break
    if not loaded and not any(c["source"] == "replan" for c in first["plan_changes"]):
        pytest.skip("other work kept this machine busy: the agent never knew the plan's pace to see a change from it")
    trace = "\n".join(describe(e) for e in events if isinstance(e, (ev.AgentStepped, ev.BackendChosen)))
    assert first["status"] == "interrupted" and any(c["source"] == "replan" for c in first["plan_changes"]), trace
    done = len(first["epochs"])
    resumed = TrainingSession(SessionConfig(resume=first["run_id"], epochs=done + 2, record_history=False))
    again = list(resumed.events())
    assert again[-1].status == "success", again[-1].message
    assert [e["epoch"] for e in again[-1].result["epochs"]][-1] == done + 2
    assert any(isinstance(e, ev.HardwareObserved) for e in again)  # a resumed run observes the machine anew
    chosen = next(e for e in again if isinstance(e, ev.BackendChosen))
    assert chosen.source == "resume"


class MisrankingEstimate:
    """Tests only: the first estimate, but with the plan on every thread predicted 5 % slower than
    the 1-thread plan, a near tie ranked the wrong way round: what the run's own steps must settle."""

    def __init__(self, cores: int):
        from trainpilot.predict.first_estimate import FirstEstimate

        self.inner = FirstEstimate(cores)
        self.cores = cores

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def predict(self, profile, plan, load):
        from dataclasses import replace

        prediction = self.inner.predict(profile, plan, load)
        if plan.backend == "cpu" and plan.threads == self.cores and prediction.predicted_s is not None:
            one = self.inner.predict(profile, replace(plan, threads=1), load)
            seconds = one.predicted_s * 1.05
            detail = dict(prediction.detail, per_epoch_s=seconds / max(profile.epochs, 1))
            detail["interval"] = {"low_s": seconds * 0.8, "high_s": seconds * 1.25, "kind": "cold"}
            prediction = replace(prediction, predicted_s=seconds, detail=detail)
        return prediction


def near_tie_trial():
    """One run that starts on the misranked 1-thread plan, stopped as soon as the agent's trial on
    the run's own steps has given its verdict."""
    from trainpilot.agent.orchestrator import Agent

    agent = Agent(predictor=MisrankingEstimate(CORES))
    session = TrainingSession(
        SessionConfig(model="large_dense", epochs=40, record_history=False, adapt="verify"), orchestrator=agent
    )
    seen: list[ev.Event] = []
    for event in session.events():
        seen.append(event)
        if isinstance(event, ev.AgentStepped) and event.data.get("decided") is not None:
            session.request_stop("test saw the verdict")
    verdicts = [e for e in seen if isinstance(e, ev.AgentStepped) and e.data.get("decided") is not None]
    return seen, (verdicts[0] if verdicts else None)


def test_a_near_tie_is_settled_on_the_runs_own_steps_and_the_slower_plan_dropped():
    # A stall from elsewhere during the trial's few block pairs (a fresh-clone CI run measured
    # every thread 12x slower, +/-64 %) decides it the wrong way: a second run settles that, as the
    # busy-core test's does; both failing is a failure, with the trace.
    for _attempt in range(2):
        seen, verdict = near_tie_trial()
        if verdict is not None and verdict.data["decided"] and verdict.data["ratio"] < 1.0:
            break
    first = next(e for e in seen if isinstance(e, ev.BackendChosen))
    assert first.plan.threads == 1, "the misranking estimate makes the agent choose 1 thread"
    trace = "\n".join(describe(e) for e in seen if isinstance(e, (ev.AgentStepped, ev.BackendChosen)))
    assert verdict is not None, trace
    # large_dense steps ~1.3-1.6x faster on every thread of an idle 2-core machine: measured, not predicted
    assert verdict.data["decided"] and verdict.data["ratio"] < 1.0, trace
    moves = replans(seen, "verify")
    assert moves and moves[0].plan.threads == CORES
    assert any(c.get("trigger") == "verify" for c in seen[-1].result["plan_changes"])
