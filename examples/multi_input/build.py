"""Train the plan-upgrade model on synthetic customers and export it with torch.export to a ``.pt2``.

    python -m examples.multi_input.build [--out examples/multi_input/build] [--seed 0]

The program is exported with a dynamic batch dimension on all three inputs,
so streamscore serves batches of any size and reads the inputs (names,
dtypes, shapes) from its signature: nothing to declare but the output names
(model.json). Seeded; about two seconds on a CPU, most of it the export.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch
from torch.nn import functional

from examples.multi_input.model import PLANS, REGIONS, UpgradeModel

HERE = Path(__file__).resolve().parent
PROGRAM_NAME = "upgrade.pt2"
UNKNOWN_SHARE = 0.05  # ids replaced by "unknown" in training, so that row learns the average case


def synthetic_customers(count: int, seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(numbers, plan, region, targets)``; targets ``[count, 2]``: upgraded (0 or 1), next month's spend."""
    gen = torch.Generator().manual_seed(seed)
    spend = 10 + torch.rand(count, generator=gen) * 90
    sessions = torch.poisson(torch.full((count,), 5.0), generator=gen)
    tenure = torch.rand(count, generator=gen) * 8
    discount = (torch.rand(count, generator=gen) < 0.3).float() * 0.2
    plan = torch.randint(0, PLANS, (count,), generator=gen)
    region = torch.randint(0, REGIONS, (count,), generator=gen)
    plan_effect = torch.tensor([1.0, 0.3, -0.4, -2.0])  # the top plan has nothing to upgrade to
    region_effect = torch.tensor([0.4, 0.0, -0.3, 0.2, -0.5, 0.1])
    logit = (-0.5 + 0.03 * (spend - 50) + 0.25 * (sessions - 5) - 0.2 * tenure + 6 * discount
             + plan_effect[plan] + region_effect[region])
    upgraded = torch.bernoulli(torch.sigmoid(logit), generator=gen)
    next_spend = spend * (1 + 0.15 * plan) + 5 * region_effect[region] + torch.randn(count, generator=gen) * 2
    numbers = torch.stack([spend, sessions, tenure, discount], dim=1)
    return numbers, plan, region, torch.stack([upgraded, next_spend], dim=1)


def train(seed: int, customers: int = 3000, steps: int = 200) -> UpgradeModel:
    numbers, plan, region, targets = synthetic_customers(customers, seed)
    gen = torch.Generator().manual_seed(seed + 1000)
    plan = torch.where(torch.rand(customers, generator=gen) < UNKNOWN_SHARE, PLANS, plan)
    region = torch.where(torch.rand(customers, generator=gen) < UNKNOWN_SHARE, REGIONS, region)
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        model = UpgradeModel()
    model.numbers_mean.copy_(numbers.mean(dim=0))
    model.numbers_spread.copy_(numbers.std(dim=0).clamp(min=1e-6))
    model.spend_mean.copy_(targets[:, 1].mean())
    model.spend_spread.copy_(targets[:, 1].std())
    scaled_spend = (targets[:, 1] - model.spend_mean) / model.spend_spread
    optimizer = torch.optim.Adam(model.parameters(), lr=0.02)
    for _ in range(steps):
        optimizer.zero_grad()
        raw = model.raw(numbers, plan, region)
        upgrade_loss = functional.binary_cross_entropy_with_logits(raw[:, 0], targets[:, 0])
        loss = upgrade_loss + functional.mse_loss(raw[:, 1], scaled_spend)
        torch.autograd.backward(loss)
        optimizer.step()
    return model.eval()


def export(model: UpgradeModel, out_dir: Path) -> Path:
    """``out_dir/upgrade.pt2``: the program, its batch dimension dynamic (from 1 up)."""
    numbers, plan, region, _ = synthetic_customers(4, seed=0)  # an example batch; 2 or more, or export fixes it at 1
    batch = torch.export.Dim("batch", min=1)
    dims = {"numbers": {0: batch}, "plan": {0: batch}, "region": {0: batch}}
    program = torch.export.export(model, (numbers, plan, region), dynamic_shapes=dims)
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / PROGRAM_NAME
    torch.export.save(program, str(path))
    return path


def build_program(out_dir: Path, seed: int = 0) -> Path:
    """Train and export; returns the path of the ``.pt2``."""
    return export(train(seed), out_dir)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=HERE / "build", help="folder for the .pt2")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    model = train(args.seed)
    numbers, plan, region, targets = synthetic_customers(2000, args.seed + 1)
    with torch.inference_mode():
        predicted = model(numbers, plan, region)
    accuracy = float(((predicted[:, 0] > 0.5).float() == targets[:, 0]).float().mean())
    spend_error = float((predicted[:, 1] - targets[:, 1]).abs().mean())
    print(f"wrote {export(model, args.out)} (held-out: upgrade accuracy {accuracy:.3f}, "
          f"spend mean absolute error {spend_error:.2f})")


if __name__ == "__main__":
    main()
