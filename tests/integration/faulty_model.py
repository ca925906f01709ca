"""A user's own Servable whose code raises for chosen inputs: the poison suite's model.

Serve it with ``--model tests.integration.faulty_model:faulty``. Its ``inputs`` are an
object ``{"values": [16 numbers], "fail_in": STAGE, "pad": N}``: with ``fail_in`` set to
``prepare``, ``collate``, ``forward`` or ``split`` that stage of the user's code
raises for a batch holding the request; ``pad`` makes the output N bytes larger
(a ``"pad"`` string of N characters), for replies too large for a topic. ``prepare`` reads ``inputs["values"]``
without checking, as a user's code does: inputs without it raise KeyError.
The output of a good request is ``{"score": p}`` with p the sigmoid of a seeded
linear layer (``expected_score`` computes it offline).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

import torch

STAGES = ("prepare", "collate", "forward", "split")
_CODES = {stage: float(i + 1) for i, stage in enumerate(STAGES)}


class FaultyModule(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(18)
        self.linear = torch.nn.Linear(16, 1)

    def forward(self, batch: torch.Tensor) -> torch.Tensor:
        if bool((batch[:, 16] == _CODES["forward"]).any()):
            raise RuntimeError("forward was told to fail")
        return torch.cat([torch.sigmoid(self.linear(batch[:, :16])), batch[:, 16:]], dim=1)


class FaultyModel:
    name = "faulty"
    version = "1"

    def __init__(self) -> None:
        self.module = FaultyModule()

    def prepare(self, inputs: Any) -> list[float]:
        stage = inputs.get("fail_in")
        if stage == "prepare":
            raise ValueError("prepare was told to fail")
        return [float(v) for v in inputs["values"]] + [_CODES.get(stage, 0.0), float(inputs.get("pad", 0))]

    def collate(self, items: Sequence[list[float]]) -> torch.Tensor:
        if any(item[16] == _CODES["collate"] for item in items):
            raise TypeError("collate was told to fail")
        return torch.tensor(items, dtype=torch.float32)

    def split(self, output: torch.Tensor) -> list[Any]:
        if bool((output[:, 1] == _CODES["split"]).any()):
            raise IndexError("split was told to fail")
        return [{"score": float(p), "pad": "p" * int(pad)} if pad else {"score": float(p)}
                for p, pad in zip(output[:, 0], output[:, 2], strict=True)]

    def sample_inputs(self, rng: random.Random) -> dict[str, Any]:
        return {"values": [rng.random() for _ in range(16)]}


def faulty() -> FaultyModel:
    return FaultyModel()


def expected_score(values: Sequence[float]) -> float:
    model = FaultyModel()
    with torch.inference_mode():
        return float(torch.sigmoid(model.module.linear(torch.tensor([values], dtype=torch.float32)))[0, 0])
