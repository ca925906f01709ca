"""What the worker needs from a model, and the adapter that serves any module by its declared spec."""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from typing import Any, Protocol, runtime_checkable

import torch

from worker.core.routes import PlainReader
from worker.models.spec import Inputs, ModelInput, Outputs


@runtime_checkable
class Servable(Protocol):
    """A model plus the glue between JSON and tensors: what a ``--model package.module:factory`` may return.

    ``prepare`` runs once per request while decoding; ``collate`` builds one
    CPU batch from prepared items; ``module`` runs it; ``split`` turns the
    output into one JSON-ready value per item, in order. ``sample_inputs``
    makes valid random ``inputs`` (for warmup, demos and benchmarks). Any
    class with these attributes and methods is one: no base class is needed.

    ``collate``, ``module`` and ``split`` run one batch at a time, on one
    thread (the worker's loop, or its model thread); ``prepare`` runs on the
    loop's thread, possibly while a batch runs. The worker calls ``eval()``
    on ``module`` once and runs it under ``torch.inference_mode()`` on its
    device. A bug in ``prepare``, ``collate``, ``forward`` or ``split`` fails
    only the requests that trigger it (isolated by splitting the batch), each
    answered with error code ``model_error``.

    A Servable may also define ``cost(item) -> int``, the tokens of a
    prepared item, so that ``--max-batch-tokens`` bounds a batch's tokens.

    Attributes:
        name: The model's name, sent in each reply's ``model``.
        version: The model's version, sent in each reply's ``model_version``.
        module: The ``torch.nn.Module`` that runs a collated batch: ``module(batch)`` for a tensor,
            ``module(*args, **kwargs)`` for a ModelInput.
    """

    name: str
    version: str
    module: torch.nn.Module

    def prepare(self, inputs: Any) -> Any:
        """Check one request's ``inputs`` and turn them into an item for ``collate``.

        Runs once per request, while the request is decoded, before it is batched.

        Args:
            inputs: The request's ``inputs``, as JSON decodes them (a list, a dict, a string, a number).

        Returns:
            The prepared item: anything ``collate`` takes.

        Raises:
            InvalidInput: The inputs do not fit the model; the request is answered with the error's ``code``
                (``invalid_inputs``, ``wrong_input_length``) and message. Any other exception answers the
                request ``model_error``.
        """

    def collate(self, items: Sequence[Any]) -> torch.Tensor | ModelInput:
        """Build one batch, on the CPU, from prepared items; the worker moves it to the model's device.

        Args:
            items: Prepared items, as ``prepare`` returned them, in request order (at least one).

        Returns:
            One tensor whose first dimension is the batch (``forward``'s only argument), or a ModelInput of
                ``forward``'s positional and keyword arguments.
        """

    def split(self, output: Any) -> list[Any]:
        """Turn the module's output for a batch into one reply ``outputs`` per item, in order.

        Args:
            output: What ``module`` returned; a tensor is on the CPU and, under ``--amp``, cast back to float32.

        Returns:
            One JSON-ready value per item of the batch, in the batch's order (a count that differs fails the
                batch's items as ``model_error``).
        """

    def sample_inputs(self, rng: random.Random) -> Any:
        """Make valid random request ``inputs``, for warmup, demos, ``inspect-model`` and benchmarks.

        Args:
            rng: The source of randomness: draw from it alone, so that the same seed gives the same inputs.

        Returns:
            A value ``prepare`` accepts, as a request's JSON ``inputs``.
        """


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

    @property
    def read_plain(self) -> PlainReader | None:
        """The declared inputs' reader of plain requests, when they have one (worker/models/spec.py) and
        ``prepare`` is theirs (a subclass that prepares otherwise reads every request through it)."""
        reader: Callable[[], PlainReader | None] | None = getattr(self.inputs, "plain_reader", None)
        if reader is None or type(self).prepare is not DeclaredModel.prepare:
            return None
        return reader()

    def collate(self, items: Sequence[Any]) -> ModelInput:
        return self.inputs.collate(items)

    def split(self, output: Any) -> list[Any]:
        return self.outputs.split(output)

    def sample_inputs(self, rng: random.Random) -> Any:
        return self.inputs.sample(rng)

    def describe(self) -> dict[str, Any]:
        return {"inputs": self.inputs.describe(), "outputs": self.outputs.describe()}
