"""Bulk sending of requests, with a progress bar and an optional rate limit."""

from __future__ import annotations

import random
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
from kafka import KafkaProducer
from tqdm import tqdm

from producer.wire import encode_request, new_request_id

RequestBody = dict[str, Any]


@dataclass
class SendSummary:
    sent: int = 0
    seconds: float = 0.0
    sent_at_ms: dict[str, int] = field(default_factory=dict)  # request id -> wall time of send

    @property
    def rate(self) -> float:
        return self.sent / self.seconds if self.seconds else 0.0


def requests_from_jsonl(path: Path) -> Iterator[RequestBody]:
    """Request bodies from a JSONL file; a line without ``id`` gets a fresh one."""
    with path.open("rb") as lines:
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                body = orjson.loads(line)
            except orjson.JSONDecodeError as exc:
                raise ValueError(f"{path}:{number}: not JSON: {exc}") from None
            if not isinstance(body, dict):
                raise ValueError(f"{path}:{number}: expected a JSON object with 'inputs'")
            body.setdefault("id", new_request_id())
            yield body


def synthetic_requests(model: str, count: int, seed: int = 0) -> Iterator[RequestBody]:
    """``count`` valid requests for a built-in model, from its sample_inputs."""
    from worker.models import load_model  # imports torch: only synthetic sends need it

    servable = load_model(model)
    rng = random.Random(seed)
    for _ in range(count):
        yield {"id": new_request_id(), "inputs": servable.sample_inputs(rng)}


def send_requests(bootstrap_servers: str, topic: str, requests: Iterable[RequestBody], *,
                  total: int | None = None, rate: float | None = None, keyed: bool = True,
                  progress: bool = True) -> SendSummary:
    """Send each request to ``topic`` (keyed by id unless ``keyed`` is False). Blocks until all are acked.

    ``rate`` caps requests per second (for load tests). Raises KafkaError if a send fails.
    """
    producer = KafkaProducer(bootstrap_servers=bootstrap_servers.split(","), acks="all", linger_ms=5,
                             batch_size=256 * 1024)
    summary = SendSummary()
    futures = []
    started = time.monotonic()
    bar = tqdm(total=total, unit="req", desc=f"sending to {topic}", disable=not progress)
    try:
        for index, body in enumerate(requests):
            if rate:
                lag = started + index / rate - time.monotonic()
                if lag > 0:
                    time.sleep(lag)
            request_id = str(body["id"])
            value = encode_request(body["inputs"], request_id, body.get("reply_to"), body.get("deadline_ms"))
            summary.sent_at_ms[request_id] = time.time_ns() // 1_000_000
            futures.append(producer.send(topic, key=request_id.encode() if keyed else None, value=value))
            bar.update(1)
        producer.flush()
        for future in futures:
            future.get()  # flush() does not raise for failed records; get() does
    finally:
        bar.close()
        producer.close()
    summary.sent = len(futures)
    summary.seconds = time.monotonic() - started
    return summary
