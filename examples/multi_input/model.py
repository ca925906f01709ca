"""A plan-upgrade model with three inputs: usage numbers, a plan id and a region id.

``forward(numbers, plan, region)``:
- ``numbers``: float32 ``[n, 4]``, in the order of NUMBERS;
- ``plan``: int64 ``[n]``, a plan id in ``[0, PLANS)``;
- ``region``: int64 ``[n]``, a region id in ``[0, REGIONS)``.

An id outside its range (a plan added after training, say) is looked up in an
"unknown" row of its embedding, which training fills with the average case,
so such a request still gets a reply. Returns float32 ``[n, 2]``: the
probability that the customer upgrades, and the expected monthly spend.
"""

from __future__ import annotations

import torch
from torch import nn

NUMBERS = ("monthly_spend", "sessions_per_week", "tenure_years", "discount")
PLANS = 4
REGIONS = 6
OUTPUTS = ("upgrade_probability", "expected_monthly_spend")


def known_or_unknown(ids: torch.Tensor, known: int) -> torch.Tensor:
    """``ids`` where in ``[0, known)``; anything else becomes ``known``, the unknown row."""
    return torch.where((ids >= 0) & (ids < known), ids, torch.full_like(ids, known))


class UpgradeModel(nn.Module):
    """Embeddings for the two ids, concatenated with the standardised numbers, through a small MLP."""

    # Buffers, set from the training data: the numbers' mean and spread, and the spend's.
    numbers_mean: torch.Tensor
    numbers_spread: torch.Tensor
    spend_mean: torch.Tensor
    spend_spread: torch.Tensor

    def __init__(self, hidden: int = 32) -> None:
        super().__init__()
        self.plan_embedding = nn.Embedding(PLANS + 1, 4)
        self.region_embedding = nn.Embedding(REGIONS + 1, 3)
        self.register_buffer("numbers_mean", torch.zeros(len(NUMBERS)))
        self.register_buffer("numbers_spread", torch.ones(len(NUMBERS)))
        self.register_buffer("spend_mean", torch.zeros(()))
        self.register_buffer("spend_spread", torch.ones(()))
        self.layers = nn.Sequential(nn.Linear(len(NUMBERS) + 4 + 3, hidden), nn.ReLU(), nn.Linear(hidden, 2))

    def raw(self, numbers: torch.Tensor, plan: torch.Tensor, region: torch.Tensor) -> torch.Tensor:
        """``[n, 2]``: the upgrade logit and the standardised spend (what training fits)."""
        scaled = (numbers - self.numbers_mean) / self.numbers_spread
        plans = self.plan_embedding(known_or_unknown(plan, PLANS))
        regions = self.region_embedding(known_or_unknown(region, REGIONS))
        out: torch.Tensor = self.layers(torch.cat([scaled, plans, regions], dim=1))
        return out

    def forward(self, numbers: torch.Tensor, plan: torch.Tensor, region: torch.Tensor) -> torch.Tensor:
        raw = self.raw(numbers, plan, region)
        probability = torch.sigmoid(raw[:, 0])
        spend = raw[:, 1] * self.spend_spread + self.spend_mean
        return torch.stack([probability, spend], dim=1)
