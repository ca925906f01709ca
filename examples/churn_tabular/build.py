"""Train the churn classifier on synthetic customers and save its weights as safetensors.

    python -m examples.churn_tabular.build [--out examples/churn_tabular/build] [--seed 0]

The customers are made up here (no download): each field is drawn from a
plausible range and churn is drawn from a known logistic rule, so a trained
model should rank customers by that rule. Seeded: the same seed gives the
same weights. Takes about a second on a CPU.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch
from safetensors.torch import save_file
from torch.nn import functional

from examples.churn_tabular.model import FEATURES, ChurnMLP, build
from worker.models.loading import read_config

HERE = Path(__file__).resolve().parent
CONFIG = HERE / "model.toml"
WEIGHTS_NAME = "churn.safetensors"
PLAN_PRICES = torch.tensor([9.99, 19.99, 29.99, 49.99])


def synthetic_customers(count: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``count`` customers: fields float32 ``[count, 6]`` in FEATURES order, and churned (0 or 1) ``[count]``."""
    gen = torch.Generator().manual_seed(seed)
    tenure = torch.randint(0, 73, (count,), generator=gen).float()
    price = PLAN_PRICES[torch.randint(0, len(PLAN_PRICES), (count,), generator=gen)]
    calls = torch.poisson(torch.full((count,), 1.5), generator=gen)
    usage = torch.rand(count, generator=gen) * 100
    late = torch.poisson(torch.full((count,), 0.5), generator=gen)
    months_left = torch.randint(0, 25, (count,), generator=gen).float()
    fields = torch.stack([tenure, price, calls, usage, late, months_left], dim=1)
    # The rule the data follows: new, expensive, unhappy, late-paying, out-of-contract customers leave.
    logit = (1.0 - 0.05 * tenure + 0.04 * (price - 25) + 0.7 * calls - 0.015 * usage + 0.9 * late
             - 0.15 * months_left)
    churned = torch.bernoulli(torch.sigmoid(logit), generator=gen)
    return fields, churned


def read_hidden(config: Path) -> int:
    """The factory's ``hidden`` from the model config, after checking its fields are FEATURES in order."""
    settings = read_config(config)  # as the worker reads it
    fields = tuple(settings["inputs"]["fields"])
    if fields != FEATURES:
        raise SystemExit(f"{config}: inputs.fields must be {list(FEATURES)} in this order, got {list(fields)}")
    hidden: int = settings["hidden"]
    return hidden


def train(hidden: int, seed: int, customers: int = 4000, steps: int = 300) -> ChurnMLP:
    fields, churned = synthetic_customers(customers, seed)
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        model = build(hidden)
    model.mean.copy_(fields.mean(dim=0))
    model.spread.copy_(fields.std(dim=0).clamp(min=1e-6))
    optimizer = torch.optim.Adam(model.parameters(), lr=0.02)
    for _ in range(steps):  # full batch: 4,000 rows are small
        optimizer.zero_grad()
        loss = functional.binary_cross_entropy_with_logits(model.logits(fields)[:, 0], churned)
        torch.autograd.backward(loss)
        optimizer.step()
    return model.eval()


def accuracy(model: ChurnMLP, seed: int, customers: int = 2000) -> float:
    """Share of fresh synthetic customers (another seed) whose churn the model calls right at 0.5."""
    fields, churned = synthetic_customers(customers, seed)
    with torch.inference_mode():
        predicted = (model(fields)[:, 0] > 0.5).float()
    return float((predicted == churned).float().mean())


def save_weights(model: ChurnMLP, out_dir: Path) -> Path:
    """Write the state_dict (weights and the standardising buffers) to ``out_dir/churn.safetensors``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / WEIGHTS_NAME
    save_file({name: t.contiguous() for name, t in model.state_dict().items()}, str(path))
    return path


def build_weights(out_dir: Path, seed: int = 0, config: Path = CONFIG) -> Path:
    """Train with the config's ``hidden`` and write ``out_dir/churn.safetensors``; returns its path."""
    return save_weights(train(read_hidden(config), seed), out_dir)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=HERE / "build", help="folder for the weights")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    model = train(read_hidden(CONFIG), args.seed)
    path = save_weights(model, args.out)
    print(f"wrote {path} (held-out accuracy {accuracy(model, args.seed + 1):.3f})")


if __name__ == "__main__":
    main()
