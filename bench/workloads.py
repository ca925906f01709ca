"""Workloads: a model (a ``--model`` spec) plus a request generator, and the sizes to run them at.

Adding one is adding an entry to ``WORKLOADS``. A workload whose model cannot
be loaded here (e.g. ``minilm`` without its text packages) is skipped with the
loader's message as the note, never failed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial

import torch

from bench.plan import Plan
from producer.send import RequestBody, synthetic_requests
from worker.core.messages import Position, Reply, Timings
from worker.core.wire import encode_reply, new_request_id
from worker.models import Servable, load_model
from worker.models.spec import call_module

RequestGenerator = Callable[[int, int], Iterator[RequestBody]]  # (count, seed) -> request bodies


@dataclass(frozen=True)
class Workload:
    name: str
    model: str
    about: str
    quick: Plan
    default: Plan
    # targets that apply: "kafka_ceiling", "naive", "model_ceiling", "latency", and "fast_path" (the second
    # transport: its ceiling, streamscore on it, exactly-once on it)
    checks: tuple[str, ...]
    generator: RequestGenerator | None = None  # default: the model's own sample_inputs (producer/send.py)

    def plan(self, quick: bool) -> Plan:
        return self.quick if quick else self.default

    def requests(self, count: int, seed: int = 0) -> list[RequestBody]:
        generate = self.generator or partial(synthetic_requests, self.model)
        return list(generate(count, seed))


WORKLOADS: dict[str, Workload] = {
    "churn": Workload(
        name="churn", model="churn",
        about="tabular MLP, 16 numbers in, one probability out: light, the Kafka client dominates",
        quick=Plan(requests=3_000, ceiling_requests=3_000, naive_requests=300, batch_sizes=(1, 64),
                   wait_ms=(10,), loads=(0.5,), open_loop_s=3.0, warmup_s=0.5, model_ceiling_s=0.2,
                   model_ceiling_items=64, run_timeout_s=60.0),
        default=Plan(requests=15_000, ceiling_requests=40_000, naive_requests=1_000,
                     batch_sizes=(1, 8, 64, 256), wait_ms=(2, 10, 50), open_loop_s=6.0),
        checks=("kafka_ceiling", "naive", "latency", "fast_path"),
    ),
    "minilm": Workload(
        name="minilm", model="minilm",
        about="all-MiniLM-L6-v2 sentence embeddings, 4-40 word texts in, 384 numbers out: the model dominates",
        quick=Plan(requests=64, ceiling_requests=1_000, naive_requests=16, batch_sizes=(8,),
                   wait_ms=(10,), loads=(0.5,), open_loop_s=3.0, warmup_s=0.5, model_ceiling_s=0.2,
                   model_ceiling_items=64, run_timeout_s=60.0),
        default=Plan(requests=400, ceiling_requests=5_000, naive_requests=100,
                     batch_sizes=(1, 8, 32, 64), wait_ms=(10, 50), open_loop_s=10.0, warmup_s=2.0,
                     model_ceiling_s=1.0, run_timeout_s=120.0),
        checks=("model_ceiling", "latency"),
    ),
}


class RequestPool:
    """Request bodies generated once per workload, handed out with fresh ids (generating can be slow)."""

    def __init__(self, workload: Workload, size: int, seed: int = 0) -> None:
        self._bodies = workload.requests(size, seed)
        self._next = 0

    def take(self, count: int) -> list[RequestBody]:
        """``count`` bodies, cycling through the pool, each with a new request id."""
        out = []
        for _ in range(count):
            out.append({**self._bodies[self._next % len(self._bodies)], "id": new_request_id()})
            self._next += 1
        return out


def load_or_skip(workload: Workload) -> tuple[Servable | None, str | None]:
    """The workload's model, or None and a note saying why it is skipped."""
    try:
        return load_model(workload.model), None
    except Exception as exc:  # ModelError, or whatever a half-installed package raises
        return None, f"skipped: load_model({workload.model!r}) failed: {type(exc).__name__}: {exc}"


def reply_size(servable: Servable, requests: list[RequestBody]) -> int:
    """Mean bytes of the reply values streamscore sends for ``requests`` (what the Kafka ceiling must match)."""
    items = [servable.prepare(r["inputs"]) for r in requests]
    with torch.inference_mode():
        outputs = servable.split(call_module(servable.module, servable.collate(items)))
    sizes = [len(encode_reply(Reply(str(r["id"]), "ok", Position("t", 0, 0), servable.name, servable.version,
                                    outputs=output, timings=Timings(1.0, 1.0, 1.0), batch_size=1))[1])
             for r, output in zip(requests, outputs, strict=True)]
    return round(sum(sizes) / len(sizes))
