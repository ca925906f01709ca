"""Tensor models that wait for a gate file: to hold a worker in its start, or its loop in a batch.

Serve it with ``--model tests.integration.gated_model:gated_linear`` and
``GATED_MODEL_FILE`` naming a file that does not exist yet: warmup waits until
the test creates it (or ``GATED_MODEL_MAX_S`` passes, then it fails), so the
test sees the worker loaded but not warm for as long as it wants. It maps 16
numbers to one (a seeded linear layer and a sigmoid). The variables are not
``STREAMSCORE_*`` ones on purpose: the worker refuses unknown variables with
that prefix. ``held_linear`` is the same model with the gate moved: warmup
runs freely, and any batch with a request whose first number is HOLD waits
for the gate, holding the loop (the model runs inline on CPU).
"""

from __future__ import annotations

import os
import time

import torch

GATE_ENV = "GATED_MODEL_FILE"
MAX_S_ENV = "GATED_MODEL_MAX_S"
HOLD = 99.0


class GatedLinear(torch.nn.Module):
    version = "gated-1"

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(20261201)
        self.linear = torch.nn.Linear(16, 1)
        self.opened = False

    def forward(self, batch: torch.Tensor) -> torch.Tensor:
        if not self.opened:
            wait_for_gate()
            self.opened = True
        return torch.sigmoid(self.linear(batch))


def wait_for_gate() -> None:
    gate = os.environ.get(GATE_ENV)
    deadline = time.monotonic() + float(os.environ.get(MAX_S_ENV, "120"))
    while gate and not os.path.exists(gate):
        if time.monotonic() > deadline:
            raise RuntimeError(f"the gate {gate} was never opened")
        time.sleep(0.05)


def gated_linear() -> torch.nn.Module:
    return GatedLinear()


class HeldLinear(GatedLinear):
    def forward(self, batch: torch.Tensor) -> torch.Tensor:
        if (batch[:, 0] == HOLD).any():
            wait_for_gate()
        return torch.sigmoid(self.linear(batch))


def held_linear() -> torch.nn.Module:
    return HeldLinear()
