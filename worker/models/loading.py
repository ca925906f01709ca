"""Loading users' models: a ``.pt2`` program, TorchScript, or a factory with a config and weights.

Every failure here is a user's mistake to explain, not a traceback: each
raises ModelError naming the model, what was expected, what was found, and
what to do. Unpickling runs arbitrary code, so a pickled whole module is
refused unless the user says ``--allow-pickle``.
"""

from __future__ import annotations

import hashlib
import importlib
import inspect
import json
import pickle
import tomllib
import warnings
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import structlog
import torch

from worker.core.errors import ModelError
from worker.models.base import DeclaredModel, Servable
from worker.models.spec import (
    DTYPE_NAMES,
    Inputs,
    TensorInputs,
    TensorSpec,
    VectorInputs,
    closest_key,
    parse_inputs,
    parse_outputs,
)

log = structlog.get_logger(__name__)

SPEC_KEYS = ("inputs", "outputs")  # the config's keys that declare the spec; the rest go to the factory
PICKLE_REFUSED = ("unpickling runs arbitrary code from the file; if you trust it, pass --allow-pickle, or better, "
                  "save a state_dict (torch.save(model.state_dict(), path)) and serve it with a factory and --weights")


@dataclass(frozen=True)
class ModelSource:
    """What the user named: ``--model``, ``--model-config``, ``--weights``, ``--allow-pickle``, and the version a
    ``[models.NAME]`` table gives it (empty: none, the model's own)."""

    model: str
    config: Path | None = None
    weights: Path | None = None
    allow_pickle: bool = False
    version: str = ""


def read_config(path: Path) -> dict[str, Any]:
    """A model config file, JSON or TOML by its suffix."""
    try:
        text = path.read_bytes()
    except OSError as exc:
        raise ModelError(f"cannot read the model config {path}: {exc.strerror}") from exc
    try:
        config = tomllib.loads(text.decode()) if path.suffix == ".toml" else json.loads(text)
    except (ValueError, UnicodeDecodeError) as exc:
        kind = "TOML" if path.suffix == ".toml" else "JSON (name it .toml for TOML)"
        raise ModelError(f"the model config {path} is not valid {kind}: {exc}") from exc
    if not isinstance(config, dict):
        raise ModelError(f"the model config {path} must be an object of keys, got {type(config).__name__}")
    return config


def load_exported(source: ModelSource, config: Mapping[str, Any]) -> Servable:
    """A torch.export program: its inputs are read from its signature (the config may name the outputs)."""
    path = Path(source.model)
    try:
        program = torch.export.load(str(path))
    except Exception as exc:  # torch raises many kinds for a file that is not a program
        raise ModelError(f"cannot load {path} as a torch.export program: {exc}") from exc
    _spec_keys_only(config, source, "torch.export program")
    if "inputs" in config:  # what the config declares wins, also over a signature that cannot be served as it is
        inputs = _called_as_exported(parse_inputs(config["inputs"], str(source.config)), config["inputs"],
                                     _keyword_names(program), path)
        try:
            signature: dict[str, Any] | str = inputs_of_program(program, path).describe()
        except ModelError as exc:
            signature = str(exc)
        log.info("inputs_declared_over_signature", model=str(path), signature=signature)
    else:
        inputs = inputs_of_program(program, path)
    return DeclaredModel(program.module(), path.stem, file_version(path, source.config), inputs,
                         parse_outputs(config.get("outputs"), str(source.config)))


def inputs_of_program(program: Any, path: Path) -> Inputs:
    """The user inputs of an exported program, in order, passed as it was exported (positionally, or by keyword
    when it was exported with kwargs); the first dimension of each must be dynamic."""
    user_inputs = list(program.graph_signature.user_inputs)
    keywords = _keyword_names(program)
    if keywords and len(keywords) != len(user_inputs):
        raise ModelError(f"{path}: the program takes {len(user_inputs) - len(keywords)} inputs by position and "
                         f"{len(keywords)} by keyword ({', '.join(keywords)}); streamscore passes all of them one "
                         "way: export it with every input in args, or every one in kwargs")
    placeholders = {node.name: node for node in program.graph.nodes if node.op == "placeholder"}
    specs: list[TensorSpec] = []
    for name in user_inputs:
        value = placeholders[name].meta.get("val")
        if not isinstance(value, torch.Tensor):
            raise ModelError(f"{path}: input {name!r} is not a tensor; streamscore serves tensor inputs only")
        shape = tuple(value.shape)
        if not shape or not isinstance(shape[0], torch.SymInt):
            raise ModelError(
                f"{path}: the batch dimension (dim 0) of input {name!r} is static, of size "
                f"{shape[0] if shape else 'none (a scalar)'}, so it only takes batches of that size. Export it "
                "with a dynamic batch: torch.export.export(model, example_args, dynamic_shapes="
                "{'" + name + "': {0: torch.export.Dim('batch', min=1)}}) (min=1 needs an example batch of 2 or more)")
        rest = shape[1:]
        if any(isinstance(d, torch.SymInt) for d in rest):
            raise ModelError(f"{path}: input {name!r} has a dynamic dimension besides the batch {shape}; declare "
                             "its inputs in --model-config (e.g. kind sequence) to serve it")
        dtype = DTYPE_NAMES.get(value.dtype)
        if dtype is None:
            raise ModelError(f"{path}: input {name!r} is {value.dtype}; streamscore feeds float32, int64 or bool")
        specs.append(TensorSpec(keywords[len(specs)] if keywords else name, dtype, tuple(int(d) for d in rest)))
    if keywords:
        return TensorInputs(tuple(specs), keyword=True)
    if len(specs) == 1 and specs[0].dtype == "float32" and len(specs[0].shape) == 1:
        return VectorInputs(specs[0].shape[0])  # one row of numbers: a plain array on the wire
    return TensorInputs(tuple(specs))


def _called_as_exported(inputs: Inputs, declared: Mapping[str, Any], keywords: list[str], path: Path) -> Inputs:
    """Declared inputs passed as the program was exported: by keyword when it takes ``keywords`` (the tensors
    kind, unless its ``call`` says otherwise); a kind that passes its inputs by position is refused then."""
    if not keywords:
        return inputs
    if isinstance(inputs, TensorInputs) and "call" not in declared:
        return replace(inputs, keyword=True)
    if isinstance(inputs, TensorInputs) and inputs.keyword:
        return inputs
    raise ModelError(f"{path}: the program takes its inputs by keyword ({', '.join(keywords)}), and inputs of kind "
                     f"{declared.get('kind')} are passed by position: export it with them in args, or declare "
                     "kind = \"tensors\" with call = \"keyword\"")


def _keyword_names(program: Any) -> list[str]:
    """The names of the inputs an exported program takes by keyword, in order: its call spec is the pytree of
    (args, kwargs) it was exported with. Empty for one exported with positional inputs only."""
    try:
        spec = program.call_spec.in_spec
        kwargs = spec.child(1) if hasattr(spec, "child") else spec.children_specs[1]  # child(): torch 2.10 on
        return [str(name) for name in kwargs.context]
    except (AttributeError, IndexError, TypeError):
        return []


def load_torchscript(source: ModelSource, config: Mapping[str, Any]) -> Servable:
    path = Path(source.model)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)  # said once, below, with what to do instead
            module = torch.jit.load(str(path), map_location="cpu")  # type: ignore[no-untyped-call]
    except RuntimeError:
        return _load_not_torchscript(source, config)
    log.info("torchscript_is_deprecated", model=str(path),
             advice="torch deprecates TorchScript: export the model with torch.export and serve the .pt2")
    _spec_keys_only(config, source, "TorchScript program")
    inputs = _declared_or_guessed(module, config, source)
    return DeclaredModel(module, path.stem, file_version(path, source.config), inputs,
                         parse_outputs(config.get("outputs"), str(source.config)))


def _spec_keys_only(config: Mapping[str, Any], source: ModelSource, kind: str) -> None:
    """A program's model config declares its inputs and outputs only (a factory's holds its arguments too): any
    other key is a typo, refused rather than ignored."""
    for key in config:
        if key not in SPEC_KEYS:
            raise ModelError(f"the model config {source.config} has a key {key!r}, which a {kind} does not take "
                             f"({closest_key(key, SPEC_KEYS)}); only a factory's config holds other keys, its "
                             "arguments")


def _load_not_torchscript(source: ModelSource, config: Mapping[str, Any]) -> Servable:
    """A .pt that is not TorchScript: a state_dict (say how to serve it), or a pickled module (refused)."""
    path = Path(source.model)
    loaded = _torch_load(path, source.allow_pickle, "the model, not TorchScript")
    if isinstance(loaded, torch.nn.Module):
        inputs = _declared_or_guessed(loaded, config, source)
        return DeclaredModel(loaded, path.stem, file_version(path, source.config), inputs,
                             parse_outputs(config.get("outputs"), str(source.config)))
    if isinstance(loaded, dict):
        raise ModelError(f"{path} holds weights (a state_dict of {len(loaded)} tensors), not a model: serve it as "
                         f"--model package.module:factory --weights {path}, the factory building the module")
    raise ModelError(f"{path} holds a {type(loaded).__name__}, not a model")


def load_factory(source: ModelSource, config: Mapping[str, Any]) -> Servable:
    module_name, _, attr = source.model.partition(":")
    try:
        factory = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        raise ModelError(f"cannot import model factory {source.model!r}: {exc}") from exc
    kwargs = {key: value for key, value in config.items() if key not in SPEC_KEYS}
    try:
        inspect.signature(factory).bind(**kwargs)
    except TypeError as exc:
        raise ModelError(f"model factory {source.model} does not take the config's keys "
                         f"({', '.join(sorted(kwargs)) or 'none'}): {exc}") from exc
    try:
        built = factory(**kwargs)
    except ValueError as exc:  # how a factory says a config value is out of range
        raise ModelError(f"model factory {source.model} refused the config's values: {exc}") from exc
    if isinstance(built, torch.nn.Module):
        if source.weights is not None:
            load_weights(built, source)
        inputs = _declared_or_guessed(built, config, source)
        own = str(getattr(built, "version", ""))
        version = own or content_version(source.weights, source.config)
        if source.weights is None and not own and not source.version:
            log.warning("model_weights_unversioned", model=source.model, version=version,
                        detail="the factory's module came with no --weights file and no version attribute: its "
                               "replies carry a version that does not follow its weights, and a factory that does "
                               "not seed them serves other weights on each worker and each start",
                        advice="load its weights with --weights (its version then follows the file), or give the "
                               "module a version attribute")
        return DeclaredModel(built, source.model, version, inputs,
                             parse_outputs(config.get("outputs"), str(source.config)))
    if source.weights is not None:
        raise ModelError(f"--weights needs a factory that returns a torch.nn.Module; {source.model} returned "
                         f"{type(built).__name__}, which loads its own weights")
    if isinstance(built, Servable):
        return built
    raise ModelError(f"{source.model} returned {type(built).__name__}; expected a torch.nn.Module or a Servable")


def load_weights(module: torch.nn.Module, source: ModelSource) -> None:
    """Load ``--weights`` into ``module`` with strict key matching; every mismatch is named."""
    path = source.weights
    assert path is not None
    state = _read_weights(path, source.allow_pickle)
    expected = set(module.state_dict())
    missing, unexpected = sorted(expected - set(state)), sorted(set(state) - expected)
    if missing or unexpected:
        raise ModelError(f"the weights in {path} do not match {source.model}: missing keys "
                         f"{_some(missing)}; unexpected keys {_some(unexpected)}. Check that the factory builds "
                         "the same architecture (and config) the weights were saved from")
    try:
        module.load_state_dict(state, strict=True)
    except RuntimeError as exc:  # the keys match but a shape does not
        reasons = "; ".join(line.strip() for line in str(exc).splitlines()[1:]) or str(exc)
        raise ModelError(f"the weights in {path} do not fit {source.model}: {reasons}") from exc


def _read_weights(path: Path, allow_pickle: bool) -> dict[str, torch.Tensor]:
    if not path.is_file():
        raise ModelError(f"weights file {path} does not exist")
    if path.suffix == ".safetensors":
        from safetensors.torch import load_file
        try:
            return load_file(str(path))
        except Exception as exc:
            raise ModelError(f"cannot read {path} as safetensors: {exc}") from exc
    kind = _model_archive(path)
    if kind is not None:
        raise ModelError(f"{path} is {kind}, a whole model, not weights: serve it as --model {path}, without "
                         "--weights (and without the factory)")
    state = _torch_load(path, allow_pickle, "weights")
    if isinstance(state, torch.nn.Module):
        state = state.state_dict()
    if not isinstance(state, dict) or not all(isinstance(v, torch.Tensor) for v in state.values()):
        raise ModelError(f"{path} does not hold a state_dict (a mapping of names to tensors)")
    return state


def _model_archive(path: Path) -> str | None:
    """What kind of whole model the zip archive at ``path`` holds (TorchScript, a torch.export program), if any."""
    if not zipfile.is_zipfile(path):
        return None
    with zipfile.ZipFile(path) as archive:
        names = archive.namelist()
    if any(name.endswith("/constants.pkl") for name in names) and any("/code/" in name for name in names):
        return "a TorchScript model"
    if any(name.endswith("/archive_format") for name in names):
        return "a torch.export program"
    return None


def _torch_load(path: Path, allow_pickle: bool, what: str) -> Any:
    """torch.load that runs no code from the file unless ``allow_pickle``; ModelError names ``what`` it was for."""
    if not zipfile.is_zipfile(path):  # what torch.save and TorchScript have written since torch 1.6
        raise ModelError(f"{path} ({what}) is not a file torch.save or TorchScript wrote: it is not a zip archive")
    try:
        return torch.load(str(path), map_location="cpu", weights_only=True)
    except pickle.UnpicklingError:
        if not allow_pickle:
            raise ModelError(f"{path} ({what}) is a pickled Python object: refused, because {PICKLE_REFUSED}") from None
        return torch.load(str(path), map_location="cpu", weights_only=False)
    except Exception as exc:
        raise ModelError(f"cannot load {path} ({what}) with torch.load: {exc}") from exc


def _declared_or_guessed(module: torch.nn.Module, config: Mapping[str, Any], source: ModelSource) -> Inputs:
    """The config's inputs; without them, a vector as wide as the module's first Linear layer."""
    if "inputs" in config:
        return parse_inputs(config["inputs"], str(source.config))
    width = first_linear_width(module)
    if width is None:
        raise ModelError(f"{source.model} has no signature to read and its inputs cannot be guessed: declare them in "
                         '--model-config, e.g. {"inputs": {"kind": "vector", "length": 8}} (see docs/models.md, '
                         '"Bring your own model")')
    log.info("inputs_guessed", model=source.model, inputs={"kind": "vector", "length": width},
             advice="declare inputs in --model-config to be explicit")
    return VectorInputs(width)


def first_linear_width(module: torch.nn.Module) -> int | None:
    """in_features of the first layer with parameters, when it is a Linear (or TorchScript of one)."""
    for child in module.modules():
        weight = getattr(child, "weight", None)
        if isinstance(weight, torch.Tensor):
            linear = isinstance(child, torch.nn.Linear) or getattr(child, "original_name", "") == "Linear"
            return int(weight.shape[1]) if linear and weight.dim() == 2 else None
    return None


def file_version(path: Path, config: Path | None) -> str:
    return content_version(path, config)


def content_version(*paths: Path | None) -> str:
    """The first 12 hex digits of the SHA-256 of the files that define the model ("0" when none do)."""
    digest = hashlib.sha256()
    present = [p for p in paths if p is not None]
    for path in present:
        digest.update(path.read_bytes())
    return digest.hexdigest()[:12] if present else "0"


def _some(keys: list[str]) -> str:
    if not keys:
        return "none"
    shown = ", ".join(keys[:8])
    return shown + (f" and {len(keys) - 8} more" if len(keys) > 8 else "")



