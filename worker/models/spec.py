"""Declared inputs and outputs: how a request's JSON becomes tensors, and a model's output a reply.

A model config (``--model-config``, JSON or TOML) may declare, under
``inputs``, one of these kinds (a ``.pt2`` program declares its own by its
signature):

- ``{"kind": "vector", "length": 8}``: ``inputs`` is an array of 8 numbers;
  the model gets one float32 tensor ``[n, 8]``.
- ``{"kind": "fields", "fields": ["tenure", "plan_price"]}``: ``inputs`` is
  an object of numbers, placed by name into one float32 tensor ``[n, 2]``.
- ``{"kind": "tensors", "tensors": [{"name": "numbers", "dtype": "float32",
  "shape": [4]}, {"name": "plan", "dtype": "int64", "shape": [], "high": 5}],
  "call": "positional"}``: ``inputs`` is an object with one (nested) array or
  scalar per tensor; the model gets them in order (or by name with
  ``"call": "keyword"``). dtypes: float32, int64, bool; ``high`` bounds int64
  values to ``[0, high)`` (an embedding's size).
- ``{"kind": "sequence", "max_length": 128, "high": 30522}``: ``inputs`` is
  an array of 1 to ``max_length`` integers; a batch is padded to its longest
  with ``pad_value`` (default 0) and the model gets ``(ids, mask)``, int64 and
  bool ``[n, longest]``, the mask True at real positions.

Under ``outputs``, optionally: ``{"names": ["churn_probability"]}`` names the
values of each output row, in order (``{"churn_probability": 0.8}``; a row of
more than one dimension is read flattened);
``{"labels": ["invoice", "letter"], "softmax": true, "top_k": 2}`` makes a
classifier's reply ``{"label": "invoice", "scores": {"invoice": 0.9, ...}}``.
Without it, the reply's ``outputs`` is the model's output row as a list.

A request that does not fit gets an error reply (``wrong_input_length``,
``invalid_inputs`` naming the field), never a crashed batch.
"""

from __future__ import annotations

import difflib
import functools
import itertools
import math
import random
import struct
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any, Protocol

import msgspec
import torch

from worker.core.errors import InvalidInput, ModelError, json_type
from worker.core.routes import PlainReader
from worker.core.wire import ERR_INVALID_INPUTS, ERR_WRONG_INPUT_LENGTH, MAX_ID_LENGTH

DTYPES = {"float32": torch.float32, "int64": torch.int64, "bool": torch.bool}
DTYPE_NAMES = {dtype: name for name, dtype in DTYPES.items()}
MAX_MAGNITUDE = 1e30


@dataclass(frozen=True)
class ModelInput:
    """One collated batch: the positional and keyword arguments of the model's ``forward``.

    What ``Servable.collate`` returns when ``forward`` takes more than one tensor. Each tensor's first
    dimension is the batch.

    Attributes:
        args: The positional arguments, in order.
        kwargs: The keyword arguments, by name.
    """

    args: tuple[torch.Tensor, ...] = ()
    kwargs: dict[str, torch.Tensor] = field(default_factory=dict)

    @classmethod
    def of(cls, batch: torch.Tensor | ModelInput) -> ModelInput:
        """A collated batch as arguments: one tensor is the only positional argument.

        Args:
            batch: What ``collate`` returned.

        Returns:
            ``batch`` itself when it is a ModelInput, else a ModelInput with ``batch`` as its only argument.
        """
        return batch if isinstance(batch, ModelInput) else cls((batch,))

    def to(self, device: torch.device, non_blocking: bool = False, pin: bool = False) -> ModelInput:
        """Every tensor on ``device``.

        Args:
            device: Where the tensors go.
            non_blocking: Copy without waiting, where torch can (from page-locked memory to CUDA).
            pin: Copy each tensor into page-locked host memory first (CUDA only).

        Returns:
            A new ModelInput; this one is unchanged.
        """
        def move(tensor: torch.Tensor) -> torch.Tensor:
            return (tensor.pin_memory() if pin else tensor).to(device, non_blocking=non_blocking)
        return ModelInput(tuple(move(t) for t in self.args), {k: move(t) for k, t in self.kwargs.items()})

    def shapes(self) -> list[str]:
        """Each argument's shape and dtype, for messages: ``(64, 16) float32``, keyword ones as ``name=...``."""
        def shape(tensor: torch.Tensor) -> str:
            return f"{tuple(tensor.shape)} {str(tensor.dtype).removeprefix('torch.')}"
        return [shape(t) for t in self.args] + [f"{name}={shape(t)}" for name, t in self.kwargs.items()]


def call_module(module: torch.nn.Module, batch: torch.Tensor | ModelInput) -> Any:
    """``module(*args, **kwargs)`` of a collated batch."""
    call = ModelInput.of(batch)
    return module(*call.args, **call.kwargs)


class Inputs(Protocol):
    def prepare(self, inputs: Any) -> Any:
        """Validate one request's JSON ``inputs``; raises InvalidInput naming what is wrong."""
    def collate(self, items: Sequence[Any]) -> ModelInput: ...
    def sample(self, rng: random.Random) -> Any:
        """Valid random JSON ``inputs`` (warmup, demos, ``inspect-model``)."""
    def describe(self) -> dict[str, Any]:
        """The spec, as it would be written in a model config."""


def number(value: Any, where: str) -> float:
    if type(value) is not float and type(value) is not int:
        raise InvalidInput(ERR_INVALID_INPUTS, f"{where} must be a number, got {json_type(value)}")
    if not math.isfinite(value) or abs(value) > MAX_MAGNITUDE:
        raise InvalidInput(ERR_INVALID_INPUTS, f"{where} is out of range: {value!r}")
    return value


_NUMBER_TYPES = {float, int}


def numbers(values: list[Any], where: Callable[[int], str]) -> list[float]:
    """``values`` as they are when every one is a number in range, else raises naming the first that is not
    (``where(i)``). The common case is checked in a few passes in C: per number in Python it cost 2-3 µs of
    the worker's CPU per request of 16 numbers, the largest share of decoding one."""
    if (values and set(map(type, values)) <= _NUMBER_TYPES and max(map(abs, values)) <= MAX_MAGNITUDE
            and math.isfinite(sum(values))):
        return values
    return [number(value, where(i)) for i, value in enumerate(values)]


def float_rows(rows: Sequence[list[float]], width: int) -> torch.Tensor:
    """A (len(rows), width) float32 tensor of rows of numbers, packed by struct into one buffer in C: 0.23 µs a
    row of 16, against 0.36 through a numpy array of the nested lists, 0.45 through a flat array('f') and 0.69
    through torch.tensor (64 rows, in-process timeit). Raises ValueError when a row is not ``width`` long."""
    if rows and set(map(len, rows)) != {width}:
        raise ValueError(f"rows of {sorted(set(map(len, rows)))} values where the model takes {width}")
    count = len(rows) * width
    if not count:  # torch.frombuffer takes no empty buffer
        return torch.empty((len(rows), width), dtype=torch.float32)
    buffer = bytearray(4 * count)
    struct.pack_into(f"{count}f", buffer, 0, *itertools.chain.from_iterable(rows))
    return torch.frombuffer(buffer, dtype=torch.float32).reshape(len(rows), width)


def integer(value: Any, where: str, high: int | None) -> int:
    if type(value) is not int:
        raise InvalidInput(ERR_INVALID_INPUTS, f"{where} must be an integer, got {json_type(value)}")
    if value < 0 or (high is not None and value >= high) or value > 2**62:
        bound = f"in [0, {high})" if high is not None else "at least 0"
        raise InvalidInput(ERR_INVALID_INPUTS, f"{where} must be {bound}, got {value}")
    return value


_PLAIN_ID = Annotated[str, msgspec.Meta(min_length=1, max_length=MAX_ID_LENGTH)]
_PLAIN_NUMBER = Annotated[float, msgspec.Meta(ge=-MAX_MAGNITUDE, le=MAX_MAGNITUDE)]


def plain_reader(inputs: Any, item: Callable[[Any], list[float]] | None = None) -> PlainReader:
    """The reader of plain requests (``{"id": ..., "inputs": ...}``, nothing else) whose inputs have the msgspec
    type ``inputs``: msgspec checks the id and the inputs in C as it reads the value (0.5 µs a request of 16
    numbers, against 2.7 for the full path), and ``item`` makes the item ``prepare`` would (None: the inputs
    as read). What msgspec refuses raises its DecodeError, for the full path to answer."""
    plain = msgspec.defstruct("PlainRequest", [("id", _PLAIN_ID), ("inputs", inputs)], forbid_unknown_fields=True)
    return PlainReader(msgspec.json.Decoder(plain).decode, msgspec.DecodeError, item)


@functools.cache
def vector_reader(length: int) -> PlainReader:
    """Vector inputs of ``length`` numbers. One reader a length, so that models of the same inputs share it."""
    return plain_reader(Annotated[list[_PLAIN_NUMBER], msgspec.Meta(min_length=length, max_length=length)])


@functools.cache
def fields_reader(fields: tuple[str, ...]) -> PlainReader:
    """Field inputs: an object of exactly ``fields``, each a number; its item lists them in ``fields`` order."""
    names = [f"field_{i}" for i in range(len(fields))]  # the fields' own names need not be identifiers
    numbers = msgspec.defstruct("PlainFields", [(name, _PLAIN_NUMBER) for name in names],
                                rename=dict(zip(names, fields, strict=True)), forbid_unknown_fields=True)
    return plain_reader(numbers, lambda inputs: list(msgspec.structs.astuple(inputs)))


@dataclass(frozen=True)
class VectorInputs:
    length: int

    def plain_reader(self) -> PlainReader | None:
        """None for a subclass that prepares otherwise."""
        return vector_reader(self.length) if type(self).prepare is VectorInputs.prepare else None

    def prepare(self, inputs: Any) -> list[float]:
        if not isinstance(inputs, list):
            raise InvalidInput(ERR_INVALID_INPUTS, f"'inputs' must be an array of {self.length} numbers, "
                               f"got {json_type(inputs)}")
        if len(inputs) != self.length:
            raise InvalidInput(ERR_WRONG_INPUT_LENGTH, f"'inputs' must have {self.length} numbers, got {len(inputs)}")
        return numbers(inputs, lambda i: f"inputs[{i}]")

    def collate(self, items: Sequence[list[float]]) -> ModelInput:
        return ModelInput((float_rows(items, self.length),))

    def sample(self, rng: random.Random) -> list[float]:
        return [round(rng.random(), 4) for _ in range(self.length)]

    def describe(self) -> dict[str, Any]:
        return {"kind": "vector", "length": self.length}


@dataclass(frozen=True)
class FieldInputs:
    fields: tuple[str, ...]

    def prepare(self, inputs: Any) -> list[float]:
        if not isinstance(inputs, dict):
            raise InvalidInput(ERR_INVALID_INPUTS, f"'inputs' must be an object with the fields "
                               f"{', '.join(self.fields)}; got {json_type(inputs)}")
        missing = [name for name in self.fields if name not in inputs]
        if missing:
            raise InvalidInput(ERR_INVALID_INPUTS, f"inputs.{missing[0]} is missing (fields: {', '.join(self.fields)})")
        unknown = sorted(set(inputs) - set(self.fields))
        if unknown:
            raise InvalidInput(ERR_INVALID_INPUTS, f"inputs.{unknown[0]} is not a field of this model "
                               f"(fields: {', '.join(self.fields)})")
        return numbers([inputs[name] for name in self.fields], lambda i: f"inputs.{self.fields[i]}")

    def plain_reader(self) -> PlainReader | None:
        """None for a subclass that prepares otherwise."""
        return fields_reader(self.fields) if type(self).prepare is FieldInputs.prepare else None

    def collate(self, items: Sequence[list[float]]) -> ModelInput:
        return ModelInput((float_rows(items, len(self.fields)),))

    def sample(self, rng: random.Random) -> dict[str, float]:
        return {name: round(rng.random(), 4) for name in self.fields}

    def describe(self) -> dict[str, Any]:
        return {"kind": "fields", "fields": list(self.fields)}


@dataclass(frozen=True)
class TensorSpec:
    """One named tensor of a request: its dtype and its shape without the batch dimension."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    high: int | None = None  # int64 only: values in [0, high)

    def read(self, value: Any) -> Any:
        where = f"inputs.{self.name}"
        return self._read(value, self.shape, where)

    def _read(self, value: Any, shape: tuple[int, ...], where: str) -> Any:
        if not shape:
            if self.dtype == "bool":
                if type(value) is not bool:
                    raise InvalidInput(ERR_INVALID_INPUTS, f"{where} must be true or false, got {json_type(value)}")
                return value
            return integer(value, where, self.high) if self.dtype == "int64" else number(value, where)
        if not isinstance(value, list):
            raise InvalidInput(ERR_INVALID_INPUTS,
                               f"{where} must be an array of {shape[0]}, got {json_type(value)}")
        if len(value) != shape[0]:
            raise InvalidInput(ERR_WRONG_INPUT_LENGTH, f"{where} must have {shape[0]} values, got {len(value)}")
        return [self._read(v, shape[1:], f"{where}[{i}]") for i, v in enumerate(value)]

    def sample(self, rng: random.Random) -> Any:
        def one() -> Any:
            if self.dtype == "bool":
                return rng.random() < 0.5
            if self.dtype == "int64":
                return rng.randrange(self.high) if self.high else 0
            return round(rng.random(), 4)

        def fill(shape: tuple[int, ...]) -> Any:
            return one() if not shape else [fill(shape[1:]) for _ in range(shape[0])]
        return fill(self.shape)

    def describe(self) -> dict[str, Any]:
        described: dict[str, Any] = {"name": self.name, "dtype": self.dtype, "shape": list(self.shape)}
        if self.high is not None:
            described["high"] = self.high
        return described


@dataclass(frozen=True)
class TensorInputs:
    tensors: tuple[TensorSpec, ...]
    keyword: bool = False

    def prepare(self, inputs: Any) -> list[Any]:
        names = [t.name for t in self.tensors]
        if not isinstance(inputs, dict):
            raise InvalidInput(ERR_INVALID_INPUTS, f"'inputs' must be an object with {', '.join(names)}; "
                               f"got {json_type(inputs)}")
        for tensor in self.tensors:
            if tensor.name not in inputs:
                raise InvalidInput(ERR_INVALID_INPUTS, f"inputs.{tensor.name} is missing (inputs: {', '.join(names)})")
        unknown = sorted(set(inputs) - set(names))
        if unknown:
            raise InvalidInput(ERR_INVALID_INPUTS, f"inputs.{unknown[0]} is not an input of this model "
                               f"(inputs: {', '.join(names)})")
        return [tensor.read(inputs[tensor.name]) for tensor in self.tensors]

    def collate(self, items: Sequence[list[Any]]) -> ModelInput:
        columns = [torch.tensor([item[i] for item in items], dtype=DTYPES[t.dtype]).reshape(len(items), *t.shape)
                   for i, t in enumerate(self.tensors)]
        if self.keyword:
            return ModelInput(kwargs={t.name: column for t, column in zip(self.tensors, columns, strict=True)})
        return ModelInput(tuple(columns))

    def sample(self, rng: random.Random) -> dict[str, Any]:
        return {t.name: t.sample(rng) for t in self.tensors}

    def describe(self) -> dict[str, Any]:
        return {"kind": "tensors", "tensors": [t.describe() for t in self.tensors],
                "call": "keyword" if self.keyword else "positional"}


@dataclass(frozen=True)
class SequenceInputs:
    max_length: int
    high: int | None = None
    pad_value: int = 0

    def prepare(self, inputs: Any) -> list[int]:
        if not isinstance(inputs, list) or not inputs:
            raise InvalidInput(ERR_INVALID_INPUTS, f"'inputs' must be an array of 1 to {self.max_length} integers")
        if len(inputs) > self.max_length:
            raise InvalidInput(ERR_WRONG_INPUT_LENGTH, f"'inputs' may have at most {self.max_length} integers, "
                               f"got {len(inputs)}")
        return [integer(value, f"inputs[{i}]", self.high) for i, value in enumerate(inputs)]

    def collate(self, items: Sequence[list[int]]) -> ModelInput:
        longest = max(len(item) for item in items)
        ids = torch.full((len(items), longest), self.pad_value, dtype=torch.int64)
        mask = torch.zeros((len(items), longest), dtype=torch.bool)
        for row, item in enumerate(items):
            ids[row, :len(item)] = torch.tensor(item, dtype=torch.int64)
            mask[row, :len(item)] = True
        return ModelInput((ids, mask))

    def sample(self, rng: random.Random) -> list[int]:
        return [rng.randrange(self.high) if self.high else 1 for _ in range(rng.randint(1, self.max_length))]

    def describe(self) -> dict[str, Any]:
        described: dict[str, Any] = {"kind": "sequence", "max_length": self.max_length, "pad_value": self.pad_value}
        if self.high is not None:
            described["high"] = self.high
        return described


class OutputWidthError(ModelError):
    """A model's output rows hold another number of values than its declared output spec names: a spec to fix."""


@dataclass(frozen=True)
class Outputs:
    """How an output row becomes a reply's ``outputs``: as it is, named, or labelled.

    What a model config's ``[outputs]`` declares; a Servable may use one for its ``split``. Give ``names`` or
    ``labels``, not both (a model config that gives both is refused); with neither, each item's ``outputs`` is
    its output row as a list.

    Attributes:
        names: Names for the values of each row, in order (a row of more than one dimension flattened):
            ``("churn_probability",)`` makes ``{"churn_probability": 0.8}``.
        labels: Class labels, one per value of a row: the reply is ``{"label": ..., "scores": {label: score}}``,
            ``label`` the one with the highest score, ``scores`` highest first.
        softmax: With ``labels``, turn each row of logits into probabilities first.
        top_k: With ``labels``, keep only the ``top_k`` highest scores (None: all).
    """

    names: tuple[str, ...] = ()
    labels: tuple[str, ...] = ()
    softmax: bool = False
    top_k: int | None = None

    def split(self, output: Any) -> list[Any]:
        """One reply ``outputs`` per row of ``output``, in order: ``Servable.split`` for a single-tensor output.

        Args:
            output: The model's output for a batch: one tensor whose first dimension is the batch.

        Returns:
            One value per row: a dict by ``names``, a label and its scores by ``labels``, or else the row as it
                is (a number, or a list of them, nested as the tensor is).

        Raises:
            ModelError: ``output`` is not a tensor, or its rows do not have one value per name or label.
        """
        if not isinstance(output, torch.Tensor):
            raise ModelError(f"the model returned {type(output).__name__}; a declared output spec needs one tensor")
        rows = output.reshape(output.shape[0], -1) if (self.names or self.labels) else output
        if self.names:
            self._check_width(rows, len(self.names), "names")
            if len(self.names) == 1:  # a score a row, the common case: 0.05 µs a row against zip's 0.38
                name = self.names[0]
                return [{name: value} for (value,) in rows.tolist()]
            return [dict(zip(self.names, row, strict=False)) for row in rows.tolist()]  # widths checked above
        if self.labels:
            self._check_width(rows, len(self.labels), "labels")
            scores = torch.softmax(rows.float(), dim=-1) if self.softmax else rows
            return [self._labelled(row) for row in scores.tolist()]
        result: list[Any] = rows.tolist()
        return result

    def _labelled(self, row: list[float]) -> dict[str, Any]:
        ranked = sorted(zip(self.labels, row, strict=True), key=lambda pair: -pair[1])[:self.top_k]
        return {"label": ranked[0][0], "scores": dict(ranked)}

    @staticmethod
    def _check_width(rows: torch.Tensor, wanted: int, key: str) -> None:
        if rows.shape[1] != wanted:
            raise OutputWidthError(f"the model's output has {rows.shape[1]} values per item, but outputs.{key} "
                             f"declares {wanted}")

    def describe(self) -> dict[str, Any]:
        """The spec as ``inspect-model`` shows it: as a model config's ``outputs`` declares it, or ``{"as": ...}``."""
        if self.names:
            return {"names": list(self.names)}
        if self.labels:
            described: dict[str, Any] = {"labels": list(self.labels), "softmax": self.softmax}
            if self.top_k is not None:
                described["top_k"] = self.top_k
            return described
        return {"as": "the output row as a list"}


_INPUT_KEYS = {"vector": ("length",), "fields": ("fields",), "tensors": ("tensors", "call"),
               "sequence": ("max_length", "high", "pad_value")}
_OUTPUT_KEYS = ("names", "labels", "softmax", "top_k")
_TENSOR_KEYS = ("name", "dtype", "shape", "high")


def parse_inputs(declared: Mapping[str, Any], where: str) -> Inputs:
    """The Inputs a config declares; raises ModelError naming the bad key (``where`` names the file)."""
    if not isinstance(declared, Mapping):
        raise ModelError(f"{where}: inputs must be a table of keys ([inputs] with kind = ...); got "
                         f"{json_type(declared)}")
    kind = declared.get("kind")
    if kind in _INPUT_KEYS:
        _refuse_unknown(declared, ("kind", *_INPUT_KEYS[kind]), f"{where}: inputs of kind {kind}")
    try:
        if kind == "vector":
            return VectorInputs(_positive(declared, "length", where))
        if kind == "fields":
            fields = declared.get("fields")
            if not isinstance(fields, list) or not fields or not all(isinstance(f, str) for f in fields):
                raise ModelError(f"{where}: inputs.fields must be a non-empty list of names")
            _refuse_repeated(fields, f"{where}: inputs.fields")
            return FieldInputs(tuple(fields))
        if kind == "tensors":
            return _parse_tensors(declared, where)
        if kind == "sequence":
            return SequenceInputs(_positive(declared, "max_length", where), _optional_positive(declared, "high", where),
                                  int(declared.get("pad_value", 0)))
    except (TypeError, ValueError) as exc:
        raise ModelError(f"{where}: inputs: {exc}") from exc
    raise ModelError(f"{where}: inputs.kind must be one of vector, fields, tensors, sequence; got {kind!r}")


def parse_outputs(declared: Mapping[str, Any] | None, where: str) -> Outputs:
    if not declared:
        return Outputs()
    if not isinstance(declared, Mapping):
        raise ModelError(f"{where}: outputs must be a table of keys ([outputs] with names = ... or labels = ...); "
                         f"got {json_type(declared)}")
    _refuse_unknown(declared, _OUTPUT_KEYS, f"{where}: outputs")
    names, labels = declared.get("names", []), declared.get("labels", [])
    if names and labels:
        raise ModelError(f"{where}: outputs declares both names and labels; choose one")
    for key, value in (("names", names), ("labels", labels)):
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise ModelError(f"{where}: outputs.{key} must be a list of strings")
        _refuse_repeated(value, f"{where}: outputs.{key}")
    softmax = declared.get("softmax", False)
    if type(softmax) is not bool:
        raise ModelError(f"{where}: outputs.softmax must be true or false; got {softmax!r}")
    for key, asked in (("softmax", softmax), ("top_k", "top_k" in declared)):
        if asked and not labels:
            raise ModelError(f"{where}: outputs.{key} applies to labels, and this config declares none")
    top_k = _optional_positive(declared, "top_k", where, "outputs")
    return Outputs(tuple(names), tuple(labels), softmax, top_k)


def _refuse_repeated(names: list[str], where: str) -> None:
    """Raises ModelError naming the first name given twice."""
    seen: set[str] = set()
    for name in names:
        if name in seen:
            raise ModelError(f"{where} names {name!r} twice; each name once")
        seen.add(name)


def _refuse_unknown(declared: Mapping[str, Any], known: tuple[str, ...], where: str) -> None:
    """Raises ModelError for a key not ``known``, with the known one it is closest to."""
    for key in declared:
        if key not in known:
            raise ModelError(f"{where} take no key {key!r} ({closest_key(key, known)})")


def closest_key(key: object, known: tuple[str, ...]) -> str:
    """``did you mean 'outputs'?`` for the known key closest to ``key``, else the known keys."""
    close = difflib.get_close_matches(str(key), known, n=1)
    return f"did you mean {close[0]!r}?" if close else f"its keys: {', '.join(known)}"


def _parse_tensors(declared: Mapping[str, Any], where: str) -> TensorInputs:
    tensors = declared.get("tensors")
    if not isinstance(tensors, list) or not tensors:
        raise ModelError(f"{where}: inputs.tensors must be a non-empty list of {{name, dtype, shape}}")
    specs = []
    for i, tensor in enumerate(tensors):
        if not isinstance(tensor, Mapping):
            raise ModelError(f"{where}: inputs.tensors[{i}] must be a table {{name, dtype, shape}}; got "
                             f"{json_type(tensor)}")
        _refuse_unknown(tensor, _TENSOR_KEYS, f"{where}: inputs.tensors' tables")
        if not isinstance(tensor.get("name"), str) or not tensor["name"]:
            raise ModelError(f"{where}: inputs.tensors[{i}].name must be the name of the model's argument; got "
                             f"{tensor.get('name')!r}")
        dtype = tensor.get("dtype", "float32")
        if dtype not in DTYPES:
            raise ModelError(f"{where}: inputs.tensors[{i}].dtype must be one of {', '.join(DTYPES)}; got {dtype!r}")
        shape = tensor.get("shape", [])
        if not isinstance(shape, list) or not all(isinstance(d, int) and d > 0 for d in shape):
            raise ModelError(f"{where}: inputs.tensors[{i}].shape must be a list of positive sizes (no batch "
                             f"dimension); got {shape!r}")
        specs.append(TensorSpec(str(tensor["name"]), dtype, tuple(shape), _optional_positive(tensor, "high", where)))
    _refuse_repeated([spec.name for spec in specs], f"{where}: inputs.tensors")
    call = declared.get("call", "positional")
    if call not in ("positional", "keyword"):
        raise ModelError(f"{where}: inputs.call must be positional or keyword; got {call!r}")
    return TensorInputs(tuple(specs), keyword=call == "keyword")


def _positive(declared: Mapping[str, Any], key: str, where: str, part: str = "inputs") -> int:
    value = declared.get(key)
    if type(value) is not int or value < 1:
        raise ModelError(f"{where}: {part}.{key} must be a positive integer; got {value!r}")
    return value


def _optional_positive(declared: Mapping[str, Any], key: str, where: str, part: str = "inputs") -> int | None:
    return None if declared.get(key) is None else _positive(declared, key, where, part)
