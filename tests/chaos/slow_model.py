"""A tensor model that stalls on demand, for the chaos scenario of a batch slower than max.poll.interval.ms.

Serve it with ``--model tests.chaos.slow_model:stalling_linear``. It maps 16
numbers to one (a seeded linear layer and a sigmoid). When the file named by
``CHAOS_STALL_TRIGGER`` exists, the first worker process to take it (an atomic
rename, so exactly one process wins each trigger) sleeps ``CHAOS_STALL_S``
seconds inside that batch. The first ``CHAOS_STALL_SKIP_CALLS`` calls (the
runner's warmup, 3 batches) never stall: the worker times warmup to check its
poll interval. The variables are not ``STREAMSCORE_*`` ones on purpose: the
worker refuses unknown variables with that prefix.
"""

from __future__ import annotations

import os
import time

import torch

TRIGGER_ENV = "CHAOS_STALL_TRIGGER"
STALL_S_ENV = "CHAOS_STALL_S"
SKIP_CALLS_ENV = "CHAOS_STALL_SKIP_CALLS"


class StallingLinear(torch.nn.Module):
    version = "chaos-stall-1"

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(20261130)
        self.linear = torch.nn.Linear(16, 1)
        self.calls = 0
        self.skip_calls = int(os.environ.get(SKIP_CALLS_ENV, "3"))

    def forward(self, batch: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        if self.calls > self.skip_calls:
            stall_if_triggered()
        return torch.sigmoid(self.linear(batch))


def stall_if_triggered() -> None:
    """Sleep once per trigger file, in whichever process takes it first."""
    trigger = os.environ.get(TRIGGER_ENV)
    if not trigger or not os.path.exists(trigger):
        return
    try:
        os.rename(trigger, f"{trigger}.taken-by-{os.getpid()}")
    except FileNotFoundError:
        return  # another worker took it
    time.sleep(float(os.environ.get(STALL_S_ENV, "10")))


def stalling_linear() -> torch.nn.Module:
    return StallingLinear()
