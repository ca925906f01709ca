"""``bench.heavy_model:heavy``: a deep, wide MLP, the heavy model of ``bench.two_models``.

It takes what ``churn`` takes (an array of 16 numbers) and answers one
probability, so that one request generator serves both models; in between,
``depth`` square layers of ``width`` make a batch cost tens of milliseconds on
one CPU thread. Measured on this project's 2-core Xeon (AVX-512), torch 1
thread, the default 2048 x 8 (2026-12-02, a shared machine): about 7-10 ms at
batch 1 and 28-31 ms at batch 32, the cost growing with the batch but not in
proportion. Serve it with
``--model bench.heavy_model:heavy`` (or ``model = "bench.heavy_model:heavy"``
in a ``[models.NAME]`` table); a model config may set ``width`` and ``depth``.
The weights come from a seeded generator: no download, the same on every machine.
"""

from __future__ import annotations

import torch
from torch import nn

FEATURES = 16  # churn's inputs
SEED = 20261202


def heavy(width: int = 2048, depth: int = 8) -> nn.Module:
    """The MLP, in eval mode, with a ``version`` naming its shape and seed. Raises ValueError for a size below 1."""
    if width < 1 or depth < 1:
        raise ValueError(f"width and depth must be at least 1, got width={width}, depth={depth}")
    layers: list[nn.Module] = [nn.Linear(FEATURES, width), nn.ReLU()]
    for _ in range(depth):
        layers += [nn.Linear(width, width), nn.ReLU()]
    layers += [nn.Linear(width, 1), nn.Sigmoid()]
    mlp = nn.Sequential(*layers)
    generator = torch.Generator().manual_seed(SEED)
    with torch.no_grad():
        for layer in mlp:
            if isinstance(layer, nn.Linear):
                # He-scaled, so that activations keep their size through the depth (no overflow to inf or NaN).
                layer.weight.copy_(torch.randn(layer.weight.shape, generator=generator)
                                   * (2.0 / layer.in_features) ** 0.5)
                layer.bias.zero_()
    mlp.eval()
    mlp.version = f"mlp{width}x{depth}-seed{SEED}"  # type: ignore[assignment]  # what replies carry
    return mlp
