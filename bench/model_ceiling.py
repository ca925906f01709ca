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
from dataclasses import dataclass

import torch

from producer.send import RequestBody
from worker.models import Servable

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
    batches = _batches(servable, requests, batch_size)
    module = servable.module.eval()
    times: list[float] = []
    with torch.inference_mode():
        for i in range(WARMUP_ROUNDS):
            module(batches[i % len(batches)])
        started = time.perf_counter()
        while time.perf_counter() - started < seconds or len(times) < max(3, len(batches)):
            before = time.perf_counter()
            module(batches[len(times) % len(batches)])
            times.append(time.perf_counter() - before)
    total = sum(times)
    return ModelCeiling(batch_size, batch_size * len(times) / total, statistics.median(times) * 1000, len(times))


def _batches(servable: Servable, requests: list[RequestBody], batch_size: int) -> list[torch.Tensor]:
    """Consecutive full batches covering ``requests`` (the last one wrapping around to the start)."""
    count = max(1, -(-len(requests) // batch_size))
    items = [servable.prepare(r["inputs"]) for r in requests]
    return [servable.collate([items[(n * batch_size + i) % len(items)] for i in range(batch_size)])
            for n in range(count)]
