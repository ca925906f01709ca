"""``churn``: a small tabular MLP with fixed weights, the light example workload.

``inputs``: an array of 16 numbers (customer features, roughly in [0, 1]).
``outputs``: ``{"churn_probability": p}`` with p in [0, 1].
The weights come from a seeded generator, so every machine computes the same
probabilities for the same inputs; it needs no download.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

import torch
from torch import nn

from worker.models.base import check_numbers

FEATURES = 16
SEED = 20261130


def _churn_mlp() -> nn.Module:
    generator = torch.Generator().manual_seed(SEED)
    mlp = nn.Sequential(
        nn.Linear(FEATURES, 64), nn.ReLU(),
        nn.Linear(64, 32), nn.ReLU(),
        nn.Linear(32, 1), nn.Sigmoid(),
    )
    with torch.no_grad():
        for param in mlp.parameters():
            param.copy_(torch.randn(param.shape, generator=generator) * 0.3)
    return mlp


class ChurnModel:
    name = "churn"
    version = f"mlp16-seed{SEED}"

    def __init__(self) -> None:
        self.module = _churn_mlp()

    def prepare(self, inputs: Any) -> list[float]:
        return check_numbers(inputs, FEATURES)

    def collate(self, items: Sequence[list[float]]) -> torch.Tensor:
        return torch.tensor(items, dtype=torch.float32)

    def split(self, output: torch.Tensor) -> list[Any]:
        return [{"churn_probability": p} for p in output.squeeze(-1).tolist()]

    def sample_inputs(self, rng: random.Random) -> list[float]:
        return [round(rng.random(), 4) for _ in range(FEATURES)]
