"""A user model file (test double) whose rank misbehaves on purpose: on the rank named by
TP_TEST_FAULT_RANK, the TP_TEST_FAULT_AFTER-th forward call either kills its own process
(TP_TEST_FAULT=die, as SIGKILL or an OOM killer would) or never returns (TP_TEST_FAULT=hang);
TP_TEST_FAULT=slow makes every forward call of that rank 3 ms slower (a slow worker)."""
import os
import signal
import time

import torch
from torch import nn

CALLS = [0]


class FaultyMLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Flatten(), nn.Linear(28 * 28, 32), nn.ReLU(), nn.Linear(32, 10))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if os.environ.get("RANK") == os.environ.get("TP_TEST_FAULT_RANK") and self.training:
            if os.environ.get("TP_TEST_FAULT") == "slow":
                time.sleep(0.003)
            CALLS[0] += 1
            if CALLS[0] == int(os.environ.get("TP_TEST_FAULT_AFTER", "0")):
                if os.environ.get("TP_TEST_FAULT") == "hang":
                    while True:
                        time.sleep(60)
                os.kill(os.getpid(), signal.SIGKILL)
        return self.net(x)
