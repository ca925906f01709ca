"""The churn classifier's module and the factory streamscore calls (``--model examples.churn_tabular.model:build``).

The module takes raw field values, float32 ``[n, 6]`` in the order of
FEATURES, standardises them with the training data's mean and spread (kept as
buffers, so they travel in the weights file), and returns the churn
probability, float32 ``[n, 1]``.
"""

from __future__ import annotations

import torch
from torch import nn

FEATURES = (
    "tenure_months",
    "plan_price",
    "support_calls",
    "monthly_usage_gb",
    "late_payments",
    "contract_months_left",
)


class ChurnMLP(nn.Module):
    """Standardise, one hidden ReLU layer, sigmoid: raw customer fields in, churn probability out."""

    mean: torch.Tensor  # buffers: the training data's per-field mean and standard deviation
    spread: torch.Tensor

    def __init__(self, hidden: int) -> None:
        super().__init__()
        self.register_buffer("mean", torch.zeros(len(FEATURES)))
        self.register_buffer("spread", torch.ones(len(FEATURES)))
        self.layers = nn.Sequential(nn.Linear(len(FEATURES), hidden), nn.ReLU(), nn.Linear(hidden, 1))

    def logits(self, features: torch.Tensor) -> torch.Tensor:
        """The pre-sigmoid score (training uses it with a numerically stable loss)."""
        scaled = (features - self.mean) / self.spread
        out: torch.Tensor = self.layers(scaled)
        return out

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(self.logits(features))


def build(hidden: int = 16) -> ChurnMLP:
    """The factory: an untrained ChurnMLP; streamscore loads ``--weights`` into it (strict key match)."""
    if type(hidden) is not int or hidden < 1:
        raise ValueError(f"hidden must be a positive integer, got {hidden!r}")
    return ChurnMLP(hidden)
