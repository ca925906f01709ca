"""``python -m bench.cold_passes``: what a batch's pass through the model costs warm, and cold.

In this process, no broker: the worker's inline runner (``TorchRunner.run``:
collate, forward, split) on batches of a workload's own requests, in CPU µs
an item (``time.thread_time``), best of ``--repeats``, three ways:

- warm: one pass after another, as in a tight loop;
- cold: a sweep over ``--sweep-mb`` of memory before each pass, standing in
  for the Kafka client's, the dedup store's and the replies' work that runs
  between two batches in a worker on a busy machine;
- a run cold: the sweep, then ``--run`` passes back to back (the inline
  scorer's runs, worker/stream/scoring.py): the first pass pays the cold
  caches, the rest find the model's code warm.

It shows why the worker scores the batches ready together one after the
other before it answers them. Torch on one thread, as ``make bench-cpu``
runs the worker.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy
import torch

from bench.workloads import WORKLOADS
from worker.logs import configure_logging
from worker.models import load_model
from worker.models.runner import TorchRunner


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.cold_passes", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workload", choices=sorted(WORKLOADS), default="churn")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--passes", type=int, default=1000, help="passes a way and a repeat (default 1000)")
    parser.add_argument("--repeats", type=int, default=5, help="best of (default 5)")
    parser.add_argument("--sweep-mb", type=int, default=32, help="memory swept before a cold pass (default 32)")
    parser.add_argument("--run", type=int, default=8, help="passes back to back after a sweep (default 8)")
    args = parser.parse_args(argv)
    if min(args.batch_size, args.passes, args.repeats, args.sweep_mb, args.run) < 1:
        print("error: --batch-size, --passes, --repeats, --sweep-mb and --run must be at least 1", file=sys.stderr)
        return 2
    configure_logging(level="warning")  # the warmup's own lines are not the figures
    torch.set_num_threads(1)
    model = load_model(WORKLOADS[args.workload].model)
    runner = TorchRunner(model, "cpu", args.batch_size)
    runner.warmup(args.batch_size)
    rng = random.Random(7)
    items = [model.prepare(model.sample_inputs(rng)) for _ in range(args.batch_size)]
    memory = numpy.ones(args.sweep_mb * 2**18, dtype=numpy.float32)  # 4 bytes each

    def sweep() -> None:
        memory.sum()

    ways: dict[str, tuple[Callable[[], None] | None, int]] = {
        "warm, pass after pass": (None, 1), "cold, a sweep before each pass": (sweep, 1),
        f"a run cold, {args.run} passes after a sweep": (sweep, args.run)}
    print(f"{args.workload}, batches of {args.batch_size}, a sweep of {args.sweep_mb} MB, torch on one thread; "
          f"CPU µs an item, best of {args.repeats}:")
    for name, (before, run) in ways.items():
        best = min(_per_item(runner, items, before, run, args.passes) for _ in range(args.repeats))
        print(f"  {name:38s} {best:6.2f}")
    return 0


def _per_item(runner: TorchRunner, items: list[Any], before: Callable[[], None] | None, run: int, passes: int) -> float:
    """CPU µs an item of ``passes`` passes, in runs of ``run`` after ``before`` (untimed)."""
    spent = 0.0
    for _ in range(max(1, passes // run)):
        if before is not None:
            before()
        started = time.thread_time()
        for _ in range(run):
            runner.run(items)
        spent += time.thread_time() - started
    return spent / (max(1, passes // run) * run * len(items)) * 1e6


if __name__ == "__main__":
    sys.exit(main())
