"""A user model file (test double) whose rank misbehaves on purpose: on the rank named by
TP_TEST_FAULT_RANK, the TP_TEST_FAULT_AFTER-th training step (a forward call of the second instance
the process builds: the session profiles a first one, and the speed probe runs on a copy) either kills its own process
(TP_TEST_FAULT=die, as SIGKILL or an OOM killer would) or never returns (TP_TEST_FAULT=hang);
TP_TEST_FAULT=slow makes every forward call of that rank 3 ms slower (a slow worker).
TP_TEST_SLOW_CLOSE=S makes every rank that imports it take S seconds longer to leave the process
group, so the launcher's SIGTERM to the survivors of a dead rank lands while they close it."""
import os
import signal
import sys
import time

import torch
from torch import nn

if os.environ.get("TP_TEST_SLOW_CLOSE"):
    import torch.distributed as dist

    if not getattr(dist.destroy_process_group, "tp_test_slowed", False):  # imported afresh per instance: wrap once
        _destroy = dist.destroy_process_group

        def _slow_destroy(*args, **kwargs):
            time.sleep(float(os.environ["TP_TEST_SLOW_CLOSE"]))
            return _destroy(*args, **kwargs)

        _slow_destroy.tp_test_slowed = True  # type: ignore[attr-defined]
        dist.destroy_process_group = _slow_destroy

class FaultyMLP(nn.Module):
    def __init__(self):
        super().__init__()
        # The file is imported afresh for every instance, so the count lives on `sys`; the trained
        # instance is known by its id (the speed probe's deep copy has another).
        sys._tp_test_built = getattr(sys, "_tp_test_built", 0) + 1  # type: ignore[attr-defined]
        if sys._tp_test_built == 2:  # type: ignore[attr-defined]
            sys._tp_test_trained = id(self)  # type: ignore[attr-defined]
        self.calls = 0
        self.net = nn.Sequential(nn.Flatten(), nn.Linear(28 * 28, 32), nn.ReLU(), nn.Linear(32, 10))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if os.environ.get("RANK") == os.environ.get("TP_TEST_FAULT_RANK") and self.training:
            if os.environ.get("TP_TEST_FAULT") == "slow":
                time.sleep(0.003)
            self.calls += 1
            if id(self) == getattr(sys, "_tp_test_trained", None) and self.calls == int(os.environ.get("TP_TEST_FAULT_AFTER", "0")):
                if os.environ.get("TP_TEST_FAULT") == "hang":
                    while True:
                        time.sleep(60)
                os.kill(os.getpid(), signal.SIGKILL)
        return self.net(x)
