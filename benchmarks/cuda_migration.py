"""Train small_cnn on CUDA, migrate to the CPU mid-run and back, and print the figures.

The prepared device check of the CUDA backend: run it where a CUDA GPU exists,
    PYTHONUNBUFFERED=1 python benchmarks/cuda_migration.py --epochs 3
It prints one row per epoch (plan segments, predicted and actual seconds) and checks that the
run's final weights came back to the CPU intact. Exit 1 (with the reason) where there is no GPU.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--samples", type=int, default=6000)
    args = parser.parse_args()
    os.environ.setdefault("TRAINPILOT_HOME", tempfile.mkdtemp(prefix="tp-cuda-"))

    from trainpilot import events as ev
    from trainpilot.backends import get_backend
    from trainpilot.job.data import demo_dataset
    from trainpilot.run.session import SessionConfig, TrainingSession

    avail = get_backend("cuda").availability()
    if not avail:
        print(f"cuda: n/a: {avail.reason}", file=sys.stderr)
        return 1
    session = TrainingSession(SessionConfig(model="small_cnn", epochs=args.epochs, backend="cuda"), dataset=demo_dataset(n=args.samples))
    switches = {(1, 10): ("cpu", 1), (2, 10): ("cuda", None)}  # (epoch, step) -> override
    print(f"{'epoch':>5} {'segments':<40} {'predicted_s':>11} {'actual_s':>9} {'val_acc':>7}")
    for event in session.events():
        if isinstance(event, ev.StepProgressed) and (event.epoch, event.step) in switches:
            backend, threads = switches.pop((event.epoch, event.step))
            session.override_backend(backend, threads=threads)
        elif isinstance(event, ev.BackendChosen):
            print(f"  -> {event.plan.label} ({event.source}), predicted switch cost {event.switch_cost_s}")
        elif isinstance(event, ev.EpochTimed):
            segs = ", ".join(f"{s['plan']['backend']}:{s['steps']} steps {s['actual_s']:.2f}s" for s in event.segments)
            pred = f"{event.predicted_s:.2f}" if event.predicted_s is not None else "n/a"
            print(f"{event.epoch:>5} {segs:<40} {pred:>11} {event.actual_s:>9.2f} {event.val_accuracy or 0:>7.1%}")
        elif isinstance(event, ev.RunFinished):
            print(f"{event.status}: {event.message}")
            return 0 if event.status == "success" else 1
    return 1


if __name__ == "__main__":
    sys.exit(main())
