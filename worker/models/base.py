"""What the worker needs from a model, and the adapter that serves any module by its declared spec."""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

import torch

from worker.models.spec import Inputs, ModelInput, Outputs


@runtime_checkable
class Servable(Protocol):
    """A model plus the glue between JSON and tensors.

    ``prepare`` runs once per request while decoding (raise InvalidInput for
    bad inputs); ``collate`` builds one CPU batch from prepared items (one
    tensor, or a ModelInput of several as ``forward``'s arguments);
    ``module`` runs it; ``split`` turns the output into one JSON-ready value
    per item, in order. ``sample_inputs`` makes valid random ``inputs`` (for
    warmup, demos and benchmarks).
    """

    name: str
    version: str
    module: torch.nn.Module

    def prepare(self, inputs: Any) -> Any: ...

    def collate(self, items: Sequence[Any]) -> torch.Tensor | ModelInput: ...

    def split(self, output: Any) -> list[Any]: ...

    def sample_inputs(self, rng: random.Random) -> Any: ...


def eval_mode(module: torch.nn.Module) -> torch.nn.Module:
    """The module switched to inference behaviour (dropout off, norms frozen)."""
    try:
        return module.eval()
    except NotImplementedError:  # a torch.export program has no train/eval switch: it runs as it was exported
        return module


class DeclaredModel:
    """Serves any ``nn.Module`` through its declared inputs and outputs (worker/models/spec.py)."""

    def __init__(self, module: torch.nn.Module, name: str, version: str, inputs: Inputs,
                 outputs: Outputs | None = None) -> None:
        self.module = module
        self.name = name
        self.version = version
        self.inputs = inputs
        self.outputs = outputs or Outputs()

    def prepare(self, inputs: Any) -> Any:
        return self.inputs.prepare(inputs)

    def collate(self, items: Sequence[Any]) -> ModelInput:
        return self.inputs.collate(items)

    def split(self, output: Any) -> list[Any]:
        return self.outputs.split(output)

    def sample_inputs(self, rng: random.Random) -> Any:
        return self.inputs.sample(rng)

    def describe(self) -> dict[str, Any]:
        return {"inputs": self.inputs.describe(), "outputs": self.outputs.describe()}
