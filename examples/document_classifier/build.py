"""Train the document classifier's linear head on made-up archive documents; save it as safetensors.

    python -m examples.document_classifier.build [--out examples/document_classifier/build] [--seed 0]

The MiniLM encoder stays as shipped (frozen): the documents are embedded once
and a logistic-regression head is fitted on the embeddings. The head file
records its labels in its metadata. Seeded; a few seconds on a CPU.
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

import torch
from safetensors.torch import save_file
from torch import nn
from torch.nn import functional

from examples.document_classifier.documents import LABELS, labelled_documents
from worker.models.minilm import DIM, MiniLMModel

HERE = Path(__file__).resolve().parent
HEAD_NAME = "head.safetensors"


def embed(encoder: MiniLMModel, texts: list[str]) -> torch.Tensor:
    """Sentence embeddings ``[len(texts), 384]``, in batches of 32."""
    chunks = []
    with torch.inference_mode():
        for start in range(0, len(texts), 32):
            items = [encoder.prepare(text) for text in texts[start:start + 32]]
            chunks.append(encoder.module(encoder.collate(items)))
    return torch.cat(chunks)


def labelled_embeddings(encoder: MiniLMModel, per_label: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Embeddings of ``per_label`` made-up documents of each kind, and their label indices."""
    documents = labelled_documents(per_label, random.Random(seed))
    targets = torch.tensor([LABELS.index(label) for _, label in documents])
    return embed(encoder, [text for text, _ in documents]), targets


def train_head(embeddings: torch.Tensor, targets: torch.Tensor, seed: int, steps: int = 200) -> nn.Linear:
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        head = nn.Linear(DIM, len(LABELS))
    optimizer = torch.optim.Adam(head.parameters(), lr=0.05, weight_decay=1e-4)
    for _ in range(steps):  # the embeddings are unit vectors: a few hundred full-batch steps suffice
        optimizer.zero_grad()
        torch.autograd.backward(functional.cross_entropy(head(embeddings), targets))
        optimizer.step()
    return head.eval()


def save_head(head: nn.Linear, out_dir: Path) -> Path:
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / HEAD_NAME
    tensors = {name: t.detach().contiguous() for name, t in head.state_dict().items()}
    save_file(tensors, str(path), metadata={"labels": json.dumps(list(LABELS))})
    return path


def build_head(out_dir: Path, seed: int = 0, per_label: int = 12, encoder: MiniLMModel | None = None) -> Path:
    """Embed the training documents, fit the head, write ``out_dir/head.safetensors``; returns its path."""
    encoder = encoder or MiniLMModel()
    embeddings, targets = labelled_embeddings(encoder, per_label, seed)
    return save_head(train_head(embeddings, targets, seed), out_dir)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=HERE / "build", help="folder for the head")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    encoder = MiniLMModel()
    embeddings, targets = labelled_embeddings(encoder, 12, args.seed)
    head = train_head(embeddings, targets, args.seed)
    path = save_head(head, args.out)
    held_out, held_out_targets = labelled_embeddings(encoder, 10, args.seed + 1)
    with torch.inference_mode():
        accuracy = float((head(held_out).argmax(dim=1) == held_out_targets).float().mean())
    print(f"wrote {path} (held-out accuracy {accuracy:.3f} on {len(held_out_targets)} documents)")


if __name__ == "__main__":
    main()
