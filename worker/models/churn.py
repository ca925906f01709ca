"""``churn``: a small tabular MLP with fixed weights, the light example workload.

``inputs``: an array of 16 numbers (customer features, roughly in [0, 1]).
``outputs``: ``{"churn_probability": p}`` with p in [0, 1].
The weights come from a seeded generator, so every machine computes the same
probabilities for the same inputs; it needs no download.
"""

from __future__ import annotations

import torch
from torch import nn

from worker.core.samples import CHURN_FEATURES as FEATURES
from worker.models.base import DeclaredModel
from worker.models.spec import Outputs, VectorInputs

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


def churn_model() -> DeclaredModel:
    return DeclaredModel(_churn_mlp(), "churn", f"mlp16-seed{SEED}", VectorInputs(FEATURES),
                         Outputs(names=("churn_probability",)))
