"""Models whose start never ends: to stop a worker while it loads or warms up its model.

``stuck_in_load`` blocks in the factory (the model's load); ``stuck_in_warmup``
loads at once, and its forward blocks (warmup's first batch). Each blocks the
way a long call into C code does for Python's signal handlers: an exception
one of them raises (KeyboardInterrupt) does not end the wait.
"""

from __future__ import annotations

import threading

import torch


def block_forever() -> None:
    never = threading.Event()
    while True:
        try:
            never.wait()
        except BaseException:  # noqa: BLE001, S112 - what a handler raises is lost, as in C code
            continue


class StuckLinear(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(16, 1)

    def forward(self, batch: torch.Tensor) -> torch.Tensor:
        block_forever()
        return self.linear(batch)


def stuck_in_load() -> torch.nn.Module:
    block_forever()
    return torch.nn.Linear(16, 1)


def stuck_in_warmup() -> torch.nn.Module:
    return StuckLinear()
