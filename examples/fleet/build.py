"""The fleet's model files: four churn weights (one per seed) and the document classifier's head.

    python -m examples.fleet.build [--out examples/fleet/build]

Each file is built once (seeded; a file already there is kept): churn
trained with seeds 0 to 3 and the document head with seed 0. worker.toml
serves ``churn.safetensors``, the file a deploy replaces: ``deploy`` writes a
seed's weights there whole (a temporary file, then a rename), so the worker
never reads half a file. A few seconds on a CPU, most of it MiniLM embedding
the head's training documents.
"""

from __future__ import annotations

import argparse
import os
import shutil
from pathlib import Path

from safetensors.torch import save_file

from examples.churn_tabular.build import CONFIG as CHURN_CONFIG
from examples.churn_tabular.build import read_hidden, train
from examples.document_classifier.build import HEAD_NAME, build_head

HERE = Path(__file__).resolve().parent
BUILD = HERE / "build"
LIVE_SEED, CANARY_SEED, CANDIDATE_SEED, NEXT_SEED = 0, 1, 2, 3  # churn, churn-next, churn-candidate, the deploy
SERVED_NAME = "churn.safetensors"  # churn's file in worker.toml: replaced while the worker runs


def seed_weights(out_dir: Path, seed: int) -> Path:
    return out_dir / f"churn-seed{seed}.safetensors"


def build_churn(out_dir: Path, seed: int) -> tuple[Path, bool]:
    """``out_dir/churn-seedN.safetensors`` (trained unless there already); the path, and whether it was built."""
    path = seed_weights(out_dir, seed)
    if path.is_file():
        return path, False
    model = train(read_hidden(CHURN_CONFIG), seed)
    partial = path.with_name(path.name + ".partial")
    save_file({name: t.contiguous() for name, t in model.state_dict().items()}, str(partial))
    os.replace(partial, path)
    return path, True


def build_all(out_dir: Path = BUILD) -> list[str]:
    """Every file worker.toml needs but the served churn file (``deploy`` writes that); what was built."""
    out_dir.mkdir(parents=True, exist_ok=True)
    built = []
    for seed in (LIVE_SEED, CANARY_SEED, CANDIDATE_SEED, NEXT_SEED):
        path, fresh = build_churn(out_dir, seed)
        if fresh:
            built.append(path.name)
    if not (out_dir / HEAD_NAME).is_file():
        build_head(out_dir, seed=0)  # writes out_dir/head.safetensors
        built.append(HEAD_NAME)
    return built


def deploy(out_dir: Path, seed: int) -> Path:
    """Make ``seed``'s weights the served churn file, atomically (a rename over the old one); its path."""
    served = out_dir / SERVED_NAME
    partial = out_dir / f".{SERVED_NAME}.partial"
    shutil.copyfile(seed_weights(out_dir, seed), partial)
    os.replace(partial, served)
    return served


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=BUILD, help="folder for the files (worker.toml reads build/)")
    args = parser.parse_args()
    built = build_all(args.out)
    served = deploy(args.out, LIVE_SEED)
    print(f"built {', '.join(built) or 'nothing (all there)'} in {args.out}; {served.name} is seed {LIVE_SEED}'s")


if __name__ == "__main__":
    main()
