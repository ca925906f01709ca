"""The model ceiling: forward passes per second on ready-made tensors, no Kafka, no JSON.

Batches are collated once from the workload's own requests (so a text model
sees the same padding as in the worker), then the module runs them in turn
under ``torch.inference_mode()`` with the worker's thread count, after a
warmup. ``collate`` and ``split`` are not timed: this is the most any server
could get out of the model at that batch size on this machine.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

import torch

from producer.send import RequestBody
from worker.models import Servable
from worker.models.base import eval_mode
from worker.models.spec import call_module

WARMUP_ROUNDS = 3


@dataclass(frozen=True)
class ModelCeiling:
    batch_size: int
    items_per_s: float
    batch_ms_p50: float  # median time of one forward pass of a full batch
    batches_timed: int


def measure_model_ceiling(servable: Servable, requests: list[RequestBody], batch_size: int,
                          seconds: float, threads: int) -> ModelCeiling:
    """Time forward passes of ``batch_size`` items for about ``seconds``, and at least once over every
    batch ``requests`` make (so that a text model's padding is sampled fairly). Blocks."""
    if threads:
        torch.set_num_threads(threads)
    items = [servable.prepare(r["inputs"]) for r in requests]
    batches = [servable.collate(batch) for batch in full_batches(items, batch_size)]
    module = eval_mode(servable.module)
    with torch.inference_mode():
        times = time_passes([partial(call_module, module, batch) for batch in batches], seconds)
    total = sum(times)
    return ModelCeiling(batch_size, batch_size * len(times) / total, statistics.median(times) * 1000, len(times))


def full_batches(items: Sequence[Any], batch_size: int) -> list[list[Any]]:
    """Consecutive full batches covering ``items`` (the last one wrapping around to the start)."""
    count = max(1, -(-len(items) // batch_size))
    return [[items[(n * batch_size + i) % len(items)] for i in range(batch_size)] for n in range(count)]


def time_passes(passes: Sequence[Callable[[], object]], seconds: float) -> list[float]:
    """Seconds each timed pass took. Blocks.

    WARMUP_ROUNDS untimed passes first; then the passes in turn for about
    ``seconds``, and at least once each (at least 3 in all).
    """
    for i in range(WARMUP_ROUNDS):
        passes[i % len(passes)]()
    times: list[float] = []
    started = time.perf_counter()
    while time.perf_counter() - started < seconds or len(times) < max(3, len(passes)):
        before = time.perf_counter()
        passes[len(times) % len(passes)]()
        times.append(time.perf_counter() - before)
    return times
