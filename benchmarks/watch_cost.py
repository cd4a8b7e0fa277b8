"""What the closed loop's watch costs per step and per window, timed in isolation (timeit): the
step hooks the epoch loop calls (`ClosedLoop.stepped`, `ClosedLoop.at_boundary` while no window
closes) and one window's load reading (`ExternalCpuMeter` in and out). Complements
benchmarks/adapt.py's overhead part, whose epoch-level ratio cannot resolve a cost this small.

    python benchmarks/watch_cost.py
"""

from __future__ import annotations

import sys
import timeit
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "core"))


def main() -> None:
    from trainpilot.machine.contention import ExternalCpuMeter
    from trainpilot.plans import Plan
    from trainpilot.run.session import SessionConfig, TrainingSession
    from trainpilot.run.watch import WINDOW_S

    session = TrainingSession(SessionConfig(model="small_cnn", epochs=1, record_history=False))
    session.plan = Plan("cpu", threads=2)
    loop = session.adapt
    loop.active = True
    loop.watch.start()
    loop.watch.window_s = 1e9  # no window closes: what every step pays

    def step() -> None:
        loop.stepped(0.01)
        for _ in loop.at_boundary([]):
            pass

    n = 50_000
    per_step = timeit.timeit(step, number=n) / n

    def window() -> None:
        meter = ExternalCpuMeter().__enter__()
        meter.__exit__(None, None, None)

    m = 500
    per_window = timeit.timeit(window, number=m) / m
    print(f"step hooks: {per_step * 1e6:.2f} us a step")
    print(f"one window's load reading: {per_window * 1e3:.3f} ms, every {WINDOW_S} s: {100 * per_window / WINDOW_S:.3f} % of the time")
    for step_ms in (2, 15, 100):
        share = 100 * (per_step / (step_ms / 1e3) + per_window / WINDOW_S)
        print(f"  a {step_ms} ms step: the watch costs {share:.3f} % of the epoch")


if __name__ == "__main__":
    main()
