"""Does the agent offer torch.compile where it pays, and only there? One run, measured, as a table.

    python benchmarks/compile_pays.py           # ~6 min on 2 cores: calibration, then 4 cases x 4 plans
    python benchmarks/compile_pays.py --quick   # 2 cases (~3 min)

Calibrates a fresh TRAINPILOT_HOME (quick eager calibration, then `calibrate --compile`), then for
each case (a short and three long runs of three workloads) predicts every CPU plan -- 1 and all
threads, eager and compiled -- lets the agent decide, and trains every plan for real: compiled
plans each in a fresh process (so each pays inductor's start-up, as a new `trainpilot` run does)
with inductor's caches off (so no run reuses another's code). Printed
per case: predicted and actual seconds of each plan, the agent's choice and the fastest plan; then
the prediction error of eager and of compiled plans, how often the choice was the fastest plan,
the agent's regret, and in how many cases compiling actually paid.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "core"))

CASES = (  # (model, training samples, batch, epochs)
    ({"name": "mlp", "layers": 2}, 2400, 64, 1),
    ({"name": "mlp", "layers": 2}, 2400, 64, 40),
    ({"name": "large_dense", "layers": 3, "width": 512}, 2400, 128, 30),
    ({"name": "small_cnn", "layers": 2}, 1200, 64, 10),
)
QUICK = (CASES[0], CASES[2])


def _label(case: tuple[Any, ...]) -> str:
    model, samples, batch, epochs = case
    extra = "".join(f" {k[0]}{v}" for k, v in model.items() if k != "name")
    return f"{model['name']}{extra} n{samples} b{batch} e{epochs}"


def _data(samples: int) -> Any:
    from trainpilot.job.data import Dataset, demo_dataset

    full = demo_dataset(samples + samples // 9 + 1)
    return Dataset(full.X, full.y, "demo", full.num_classes)


def timed_run(case: tuple[Any, ...], plan_dict: dict[str, Any]) -> float:
    """Seconds of training steps, as the session counts them (compiling included)."""
    import warnings

    os.environ["TORCHINDUCTOR_FORCE_DISABLE_CACHES"] = "1"
    warnings.simplefilter("ignore", UserWarning)  # "dynamo_pgo force disabled": what we asked for
    from trainpilot.plans import Plan
    from trainpilot.job.prepare import seed_everything
    from trainpilot.run.trainer import Trainer
    from trainpilot.job.models import build_model

    model, _samples, batch, epochs = case
    train, val = _data(case[1]).split(0.1, 0)
    seed_everything(0)
    trainer = Trainer(build_model(model, train.sample_shape, train.num_classes), train, val, batch_size=batch, lr=1e-3, seed=0)
    trainer.use_plan(Plan.from_dict(plan_dict))
    return sum(trainer.train_step(e, s).seconds for e in range(epochs) for s in range(trainer.steps_per_epoch))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="two cases instead of six")
    args = parser.parse_args(argv)
    home = Path(tempfile.mkdtemp(prefix="tp-compile-"))
    os.environ["TRAINPILOT_HOME"] = str(home)
    from trainpilot.agent.orchestrator import observe_hardware
    from trainpilot.compat.orchestrator import HardwareOrchestrator
    from trainpilot.backends.compiled import compile_availability
    from trainpilot.backends import probe
    from trainpilot.machine.monitor import measure_load
    from trainpilot.predict import CostModel
    from trainpilot.agent.planning import profile_job

    def log(text: str) -> None:
        print(text, file=sys.stderr, flush=True)

    avail = compile_availability()
    if not avail:
        log(f"torch.compile cannot run here: {avail.reason}")
        return 1
    started = time.perf_counter()
    hardware = probe()
    model = CostModel.open(home, hardware=hardware)
    log("calibrating (quick), then measuring torch.compile ...")
    model.calibrate(quick=True)
    cc = model.calibrate_compile().compile
    assert cc is not None
    log(f"  compile: start-up {cc.once_s:.1f} s, per layer {', '.join(f'{k} {v:.1f} s' for k, v in cc.per_layer_s.items())};"
        f" compiled/eager step {', '.join(f'{k} {v:.2f}x' for k, v in cc.step_ratio.items())}")
    agent = HardwareOrchestrator(predictor=model, hardware=hardware)
    rows, errors, picks, regrets, lost, paid = [], {"eager": [], "compiled": []}, [], [], [], 0
    for case in QUICK if args.quick else CASES:
        m, samples, batch, epochs = case
        profile, _ = profile_job(m, _data(samples), epochs=epochs, batch_size=batch)
        load = measure_load(0.3)
        planning = agent.plan(profile, load, observe_hardware(hardware, load))
        predicted = {p.plan: p.predicted_s for p in planning.predictions if p.plan.backend == "cpu" and p.predicted_s is not None}
        actual = {}
        for plan in predicted:
            if not plan.mode:
                actual[plan] = timed_run(case, plan.to_dict())
                continue
            with ProcessPoolExecutor(max_workers=1, mp_context=get_context("spawn")) as pool:
                actual[plan] = pool.submit(timed_run, case, plan.to_dict()).result()
        best = min(actual, key=actual.get)  # type: ignore[arg-type]
        chosen = planning.decision.plan
        for plan, seconds in actual.items():
            errors["compiled" if plan.mode else "eager"].append(abs(predicted[plan] / seconds - 1))
        picks.append(chosen == best)
        regrets.append(actual[chosen] / actual[best] - 1)
        lost.append(actual[chosen] - actual[best])
        fastest_eager = min(s for p, s in actual.items() if not p.mode)
        paid += min(s for p, s in actual.items() if p.mode) < fastest_eager
        cells = "  ".join(f"{p.label}: {predicted[p]:6.2f} / {actual[p]:6.2f}s" for p in actual)
        rows.append(f"{_label(case):<34} {cells}  -> {chosen.label}{'' if chosen == best else f' (fastest: {best.label})'}")
        log(rows[-1])
    print(f"TrainPilot torch.compile benchmark: {len(rows)} cases on {hardware.logical_cpus} logical CPUs (predicted / actual seconds)")
    print("-" * 100)
    print("\n".join(rows))
    print("-" * 100)
    mape = lambda v: f"{100 * statistics.fmean(v):.1f} %" if v else "-"  # noqa: E731
    print(f"cold MAPE, eager plans / compiled plans        {mape(errors['eager'])} / {mape(errors['compiled'])}")
    print(f"agent's plan is the fastest                    {sum(picks)}/{len(picks)}")
    print(f"regret median / worst                          {100 * statistics.median(regrets):.1f} % / {100 * max(regrets):.1f} %"
          f" (worst {max(lost):.2f} s lost)")
    print(f"cases where a compiled plan was the fastest    {paid} of {len(rows)}")
    print(f"total time                                     {time.perf_counter() - started:.0f} s (TRAINPILOT_HOME={home})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
