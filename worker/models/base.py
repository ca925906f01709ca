"""What the worker needs from a model, and a generic adapter for plain modules."""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

import torch

from worker.core.errors import InvalidInput
from worker.core.wire import ERR_INVALID_INPUTS, ERR_WRONG_INPUT_LENGTH


@runtime_checkable
class Servable(Protocol):
    """A model plus the glue between JSON and tensors.

    ``prepare`` runs once per request while decoding (raise InvalidInput for
    bad inputs); ``collate`` builds one CPU batch from prepared items;
    ``module`` runs it; ``split`` turns the output into one JSON-ready value
    per item, in order. ``sample_inputs`` makes valid random ``inputs`` (for
    warmup, demos and benchmarks).
    """

    name: str
    version: str
    module: torch.nn.Module

    def prepare(self, inputs: Any) -> Any: ...

    def collate(self, items: Sequence[Any]) -> torch.Tensor: ...

    def split(self, output: torch.Tensor) -> list[Any]: ...

    def sample_inputs(self, rng: random.Random) -> Any: ...


def check_numbers(inputs: Any, length: int | None) -> list[float]:
    """Validate a flat array of finite numbers, optionally of a fixed length."""
    if not isinstance(inputs, list):
        raise InvalidInput(ERR_INVALID_INPUTS, f"'inputs' must be an array of numbers, got {type(inputs).__name__}")
    if length is not None and len(inputs) != length:
        raise InvalidInput(ERR_WRONG_INPUT_LENGTH, f"'inputs' must have {length} numbers, got {len(inputs)}")
    for index, value in enumerate(inputs):
        if type(value) is not float and type(value) is not int:
            raise InvalidInput(ERR_INVALID_INPUTS, f"inputs[{index}] must be a number, got {type(value).__name__}")
        if not math.isfinite(value) or abs(value) > 1e30:
            raise InvalidInput(ERR_INVALID_INPUTS, f"inputs[{index}] is out of range: {value!r}")
    return inputs


class TensorModel:
    """Serves any ``nn.Module`` that maps a float32 batch ``[n, features]`` to ``[n, ...]``.

    ``inputs`` is an array of numbers; ``outputs`` is the item's output as a
    (nested) list. With ``features`` set, the input length is checked.
    """

    def __init__(self, module: torch.nn.Module, name: str, version: str, features: int | None = None) -> None:
        self.module = module
        self.name = name
        self.version = version
        self.features = features

    def prepare(self, inputs: Any) -> list[float]:
        return check_numbers(inputs, self.features)

    def collate(self, items: Sequence[list[float]]) -> torch.Tensor:
        if len({len(item) for item in items}) > 1:
            raise InvalidInput(ERR_WRONG_INPUT_LENGTH, "inputs in one batch differ in length")
        return torch.tensor(items, dtype=torch.float32)

    def split(self, output: torch.Tensor) -> list[Any]:
        result: list[Any] = output.tolist()
        return result

    def sample_inputs(self, rng: random.Random) -> list[float]:
        return [rng.random() for _ in range(self.features or 16)]
