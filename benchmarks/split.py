"""Does a split of each batch across two 1-thread CPU workers pay on this machine, and does the
cost model know in advance? One run, measured, as a table.

    python benchmarks/split.py            # ~1 min on 2 cores after calibration (calibrates quick if needed)
    python benchmarks/split.py --quick    # two workloads

For each workload: the cost model's predicted step time of every eager CPU plan and of the split
plan (at the load observed now), then each plan trained for real for a fixed number of steps in
this process (steady steps only: the first steps are warm-up), the split's measured shares, the
agent's choice and the plan that was really fastest. Last lines: the split's prediction error and
how often the agent's choice was the fastest plan. Run it with nothing else busy (flock -x).
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "core"))

CASES = (  # (model config, batch)
    ({"name": "small_cnn"}, 64),
    ({"name": "mlp"}, 64),
    ({"name": "small_cnn", "width": 32}, 128),
    ({"name": "large_dense"}, 128),
)
WARMUP, STEPS = 10, 25  # the split skews its first 8 steps to learn its workers


def _measure(profile_model: Any, data: Any, plan: Any, batch: int) -> tuple[float, tuple[int, ...]]:
    import torch

    from trainpilot.run.trainer import Trainer
    from trainpilot.job.models import ModelSpec, build_model

    torch.manual_seed(0)
    model = build_model(ModelSpec.from_config(profile_model), data.sample_shape, data.num_classes)
    trainer = Trainer(model, data, data, batch_size=batch, lr=1e-3, seed=0)
    trainer.use_plan(plan)
    times = []
    steps = trainer.steps_per_epoch
    for k in range(WARMUP + STEPS):
        start = time.perf_counter()
        trainer.train_step(0, k % (steps - 1))  # full batches only
        times.append(time.perf_counter() - start)
    shares = getattr(trainer._runner, "last_shares", ())
    if trainer._runner is not None:
        trainer._runner.close()
    return statistics.median(times[WARMUP:]), shares


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    from trainpilot.agent.orchestrator import observe_hardware
    from trainpilot.compat.orchestrator import HardwareOrchestrator
    from trainpilot.job.data import demo_dataset
    from trainpilot.backends import probe
    from trainpilot.machine.monitor import measure_load
    from trainpilot.plans import Plan
    from trainpilot.predict import CostModel
    from trainpilot.agent.planning import profile_job

    hardware = probe()
    cost = CostModel.open(hardware=hardware)
    if not cost.is_calibrated:
        print("calibrating (quick) ...", file=sys.stderr)
        cost.calibrate(quick=True)
    data = demo_dataset(2400)
    plans = [Plan("cpu", threads=1), Plan("cpu", threads=hardware.logical_cpus), Plan.split([Plan("cpu", threads=1), Plan("cpu", threads=1)])]
    cases = CASES[:2] if args.quick else CASES
    print(f"{'workload':<24} {'plan':<36} {'predicted':>10} {'measured':>10} {'error':>7}  shares")
    errors, right = [], 0
    for model, batch in cases:
        profile, _ = profile_job(model, data, epochs=1, batch_size=batch)
        load = measure_load(0.3)
        agent = HardwareOrchestrator(predictor=cost, hardware=hardware)
        result = agent.plan(profile, load, observe_hardware(hardware, load))
        by_plan = {p.plan: p for p in result.predictions}
        measured = {}
        name = model["name"] + "".join(f" {k[0]}{v}" for k, v in model.items() if k != "name") + f" b{batch}"
        for plan in plans:
            p = by_plan.get(plan)
            predicted = p.detail["split"]["step_s"] if p is not None and plan.workers else (p.detail.get("per_epoch_s", 0) / profile.steps_per_epoch if p and p.predicted_s else None)
            step_s, shares = _measure(model, data, plan, batch)
            measured[plan] = step_s
            err = (predicted / step_s - 1) if predicted else None
            if plan.workers and err is not None:
                errors.append(abs(err))
            print(f"{name:<24} {plan.label:<36} {predicted * 1e3 if predicted else float('nan'):>8.2f}ms {step_s * 1e3:>8.2f}ms"
                  f" {err if err is not None else float('nan'):>+7.0%}  {'+'.join(map(str, shares))}")
        fastest = min(measured, key=measured.get)
        chosen = result.decision.plan
        right += chosen == fastest
        split = plans[2]
        print(f"{'':<24} agent chose {chosen.label}; fastest measured {fastest.label};"
              f" split measured {measured[split] / measured[fastest]:.2f}x the fastest's step")
    # The multi-process alternative (torch.distributed, `run --nproc`): predicted here, measured by
    # benchmarks/hetero.py. The loopback link is measured once (two gloo processes) and cached.
    from trainpilot.parallel.rank_plans import RankSpec, choose_ranks_or_single

    profile, _ = profile_job(CASES[0][0], data, epochs=1, batch_size=CASES[0][1])
    choice = choose_ranks_or_single(cost, profile, [RankSpec(), RankSpec()], measure_load(0.3))
    link = choice.multi.link
    print(f"loopback (gloo, measured): {link.bandwidth_bytes_per_s / 1e9:.2f} GB/s, {link.latency_s * 1e6:.0f} µs latency, ranks start in {link.startup_s:.1f} s")
    for line in choice.reasoning:
        print(f"  {line}")
    if errors:
        print(f"split step prediction error: mean {statistics.mean(errors):.0%}, max {max(errors):.0%} over {len(errors)} workloads")
    print(f"agent's choice was the fastest plan in {right}/{len(cases)} workloads")
    return 0


if __name__ == "__main__":
    sys.exit(main())
