"""The closed loop's moves rest on what the run measured, checked on a scripted run (scripted_host.py):
a load whose answer the prediction calls a tie is settled on the run's own steps under the load; a
pace measured before decides without a trial; a load that arrives during a near-tie trial suspends
it; a near tie too short to verify runs PyTorch's default way. Deterministic: no real load or clock.
"""

from __future__ import annotations

from scripted_host import ONE, TWO, ScriptedRun, StepTable

from trainpilot.predict.history import History, run_record
from trainpilot.run.measured_paces import MeasuredPaces, history_paces, load_key
from trainpilot.run.near_tie import BLOCK_S

# The machine as it is: beside a busy core two threads step 2.4x slower, one thread keeps its core.
TRUTH = StepTable({(TWO, 0): 0.020, (ONE, 0): 0.026, (TWO, 1): 0.048, (ONE, 1): 0.021})


def busy_between(start: float, end: float):
    return lambda t: 1.0 if start <= t < end else 0.0


def test_a_load_the_prediction_calls_a_tie_is_settled_by_a_trial_under_the_load_and_its_leaving_by_measurement():
    # The cost model thinks one thread suffers as much as two beside the busy core (1.01x): the
    # rule that decided on that prediction kept two threads. Measured, one thread is 2.3x faster.
    predicted = StepTable({(TWO, 0): 0.020, (ONE, 0): 0.026, (TWO, 1): 0.030, (ONE, 1): 0.0475})
    run = ScriptedRun(TWO, TRUTH, predicted, others=busy_between(6.0, 20.0))
    run.run()
    texts = run.texts()
    assert any(t.startswith("near tie under this load: cpu×1") for t in texts), texts
    moves = run.moves()
    assert moves[0].plan == ONE and moves[0].trigger == "load", texts
    # the trial measured both plans under the load; the leaving load finds two threads measured idle
    assert moves[1].plan == TWO and moves[1].trigger == "load", texts
    assert any("measured" in t and "faster" in t for t in run.texts("think")), texts
    assert not any("predicted 1.01x faster" in t and "stays" in t for t in texts)


def test_a_clear_prediction_still_moves_at_once_and_the_move_is_checked_on_its_steps():
    predicted = StepTable({(TWO, 0): 0.020, (ONE, 0): 0.026, (TWO, 1): 0.048, (ONE, 1): 0.022})
    run = ScriptedRun(TWO, TRUTH, predicted, others=busy_between(6.0, 1e9))
    run.run(until=lambda r: any("the move paid" in t for t in r.texts()))
    texts = run.texts()
    assert run.moves()[0].plan == ONE and run.moves()[0].trigger == "load"
    assert not any(t.startswith("near tie") for t in texts), texts
    assert any("the move paid" in t for t in texts)


def test_a_move_that_did_not_pay_goes_to_the_plan_measured_fastest_under_that_load():
    # idle on two threads in channels_last; the load moves the run to one thread; when it leaves, two
    # threads in NCHW are predicted fastest and are not: the run goes to the plan it measured fastest
    # idle (channels_last), not back to the one thread it left
    from trainpilot.plans import Plan

    cl = Plan("cpu", threads=2, memory_format="channels_last")
    truth = StepTable(
        {(cl, 0): 0.020, (TWO, 0): 0.026, (ONE, 0): 0.030, (cl, 1): 0.060, (TWO, 1): 0.070, (ONE, 1): 0.030}
    )
    # the model thinks one thread suffers as much as two beside the busy core: the run measures it
    # half that, and that bias makes two threads in NCHW look fastest once the load has gone
    predicted = StepTable(
        {(cl, 0): 0.020, (TWO, 0): 0.026, (ONE, 0): 0.030, (cl, 1): 0.060, (TWO, 1): 0.070, (ONE, 1): 0.060}
    )
    run = ScriptedRun(cl, truth, predicted, others=busy_between(6.0, 14.0))
    run.run(until=lambda r: len(r.moves()) >= 3)
    texts = run.texts()
    assert [m.plan for m in run.moves()] == [ONE, TWO, cl], texts
    assert any("measured earlier under this load: the move did not pay; moving to cpu×2 · cl" in t for t in texts), (
        texts
    )


def test_a_pace_measured_in_earlier_runs_decides_without_a_trial(tmp_path):
    # an earlier run of this workload met one thread beside a busy core: that measurement, not the
    # misleading prediction, answers the load
    history = History(tmp_path / "history.db")
    profile = _Profile("scripted|p1|in1|b1", steps_per_epoch=50)
    history.add(_phase(profile, ONE, others=1.0, step_s=0.021, epochs=4))
    predicted = StepTable({(TWO, 0): 0.020, (ONE, 0): 0.026, (TWO, 1): 0.030, (ONE, 1): 0.0475})
    run = ScriptedRun(TWO, TRUTH, predicted, others=busy_between(6.0, 1e9), history=history)
    run.run(until=lambda r: bool(r.moves()))
    texts = run.texts()
    assert run.moves()[0].plan == ONE, texts
    assert any("measured in earlier runs" in t for t in run.texts("think")), texts
    assert not any(t.startswith("near tie") for t in texts)


def test_a_load_during_a_near_tie_trial_suspends_it_and_the_tie_is_tried_again_once_steady():
    # idle: one thread predicted within 5 % of two, a near tie worth a trial; the load arrives in it
    predicted = StepTable({(TWO, 0): 0.020, (ONE, 0): 0.021, (TWO, 1): 0.048, (ONE, 1): 0.022})
    state = {"loaded_at": None}

    def others(t: float) -> float:
        return 1.0 if state["loaded_at"] is not None and t >= state["loaded_at"] else 0.0

    run = ScriptedRun(TWO, TRUTH, predicted, others=others)

    def until(r: ScriptedRun) -> bool:
        if r.loop.trial is not None and state["loaded_at"] is None and r.loop.trial.blocks:
            state["loaded_at"] = r.clock  # the load arrives one block into the trial
        return any("tried again" in t for t in r.texts())

    run.run(until=until)
    texts = run.texts()
    suspended = next(i for i, t in enumerate(texts) if t.startswith("near-tie trial suspended"))
    observed = next(i for i, t in enumerate(texts) if t.startswith("other processes now use 1.0"))
    again = next(i for i, t in enumerate(texts) if "tried again" in t)
    assert suspended < observed < again, texts
    assert run.plan == ONE  # the load decided first: one thread beside the busy core


def test_a_near_tie_too_short_to_verify_runs_pytorchs_default_way():
    # the agent chose one thread; two (PyTorch's default here) is predicted within 5 %: a run of a
    # few dozen steps cannot pay for a trial, so it runs the default way instead of a coin flip
    truth = StepTable({(TWO, 0): 0.020, (ONE, 0): 0.021})
    predicted = StepTable({(TWO, 0): 0.0205, (ONE, 0): 0.020})
    run = ScriptedRun(ONE, truth, predicted, epochs=1, steps_per_epoch=int(12 * BLOCK_S / 0.02))
    run.run()
    texts = run.texts()
    assert any("too short to verify" in t and "PyTorch's default way" in t for t in texts), texts
    assert run.moves() and run.moves()[0].plan == TWO


def test_a_short_near_tie_whose_choice_its_steps_bear_out_keeps_it():
    # one thread measured inside its prediction, two predicted slower than that measurement: nothing
    # the run measured contradicts the choice, so it is not traded for the default unverified
    truth = StepTable({(TWO, 0): 0.030, (ONE, 0): 0.0205})
    predicted = StepTable({(TWO, 0): 0.023, (ONE, 0): 0.020})
    run = ScriptedRun(ONE, truth, predicted, epochs=1, steps_per_epoch=int(12 * BLOCK_S / 0.02))
    run.run()
    texts = run.texts()
    assert any("too short to verify" in t and "cpu×1 stays" in t for t in texts), texts
    assert not run.moves()


def test_measured_paces_prefer_the_runs_own_and_group_loads_by_whole_cores():
    paces = MeasuredPaces({(ONE, 1): 0.03})
    assert paces.get(ONE, 0.8) == (0.03, "earlier runs")
    paces.note(ONE, 1.2, 0.02)
    assert paces.get(ONE, 0.9) == (0.02, "this run")
    assert paces.get(TWO, 1.0) is None
    assert load_key(0.4) == 0 and load_key(-0.2) == 0 and load_key(1.6) == 2


def test_history_paces_read_phases_and_one_plan_runs_of_this_footprint_only(tmp_path):
    history = History(tmp_path / "history.db")
    mine, other = _Profile("mine|b8", 10), _Profile("other|b8", 10)
    history.add(_phase(mine, ONE, others=1.0, step_s=0.02, epochs=2))
    history.add(_phase(mine, ONE, others=1.1, step_s=0.04, epochs=2))
    history.add(_phase(mine, TWO, others=0.0, step_s=0.01, epochs=3, status="success"))
    history.add(_phase(mine, TWO, others=1.0, step_s=0.5, epochs=3, status="failed"))
    history.add(_phase(mine, TWO, others=1.0, step_s=0.5, epochs=3, learn=False))
    history.add(_phase(other, TWO, others=1.0, step_s=0.9, epochs=3))
    paces = history_paces(history, "scripted", "mine|b8")
    assert set(paces) == {(ONE, 1), (TWO, 0)}
    assert abs(paces[(ONE, 1)] - 0.03) < 1e-9 and abs(paces[(TWO, 0)] - 0.01) < 1e-9
    assert history_paces(None, "scripted", "mine|b8") == {}


class _Profile:
    def __init__(self, footprint: str, steps_per_epoch: int):
        self.footprint, self.steps_per_epoch, self.epochs = footprint, steps_per_epoch, 1

    def to_dict(self):
        return {"model": "scripted", "steps_per_epoch": self.steps_per_epoch, "epochs": self.epochs}


def _phase(profile, plan, *, others, step_s, epochs, status="phase", learn=True):
    from dataclasses import replace

    from trainpilot.machine.contention import ExternalCpu

    load = ExternalCpu(1.0, others, 0.0).as_sample(2)
    rec = run_record(
        run_id=f"r{status}{others}{plan.threads}",
        machine_id="scripted",
        profile=profile,
        plan=plan,
        load=load,
        predicted_s=None,
        actual_s=step_s * profile.steps_per_epoch * epochs,
        status=status,
        epochs_done=epochs,
    )
    return replace(rec, learn=learn)
