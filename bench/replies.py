"""Reading a reply topic: how many replies it holds (cheap, during a run) and every reply (after it)."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

import orjson
from kafka import KafkaConsumer, TopicPartition

from bench.security import connection
from worker.core.wire import H_BATCH_SIZE, H_COMPUTE


@dataclass(frozen=True)
class ReplyRecord:
    id: str
    created_ms: int            # Kafka CreateTime: when the consumer under test sent the reply
    status: str
    compute_ms: float | None   # streamscore's headers; None from the plain loops' replies
    batch_size: int | None


def _partitions(consumer: KafkaConsumer, topic: str) -> list[TopicPartition]:
    partitions = consumer.partitions_for_topic(topic)
    if not partitions:
        raise LookupError(f"reply topic {topic!r} does not exist")
    return [TopicPartition(topic, p) for p in sorted(partitions)]


class ReplyCounter:
    """Counts the records in a reply topic from its end offsets: one small request, no fetching."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self._consumer = KafkaConsumer(**connection(bootstrap), group_id=None,
                                       client_id="bench-counter")
        self._partitions = _partitions(self._consumer, topic)

    def count(self) -> int:
        return sum(self._consumer.end_offsets(self._partitions, timeout_ms=10_000).values())

    def close(self) -> None:
        self._consumer.close()


def read_replies(bootstrap: str, topic: str) -> list[ReplyRecord]:
    """Every record of the reply topic, from the beginning up to its end offsets at the time of the call."""
    consumer = KafkaConsumer(**connection(bootstrap), group_id=None, client_id="bench-reader",
                             enable_auto_commit=False)
    try:
        partitions = _partitions(consumer, topic)
        consumer.assign(partitions)
        consumer.seek_to_beginning(*partitions)
        end = consumer.end_offsets(partitions, timeout_ms=10_000)
        out: list[ReplyRecord] = []
        while any(consumer.position(tp) < end[tp] for tp in partitions):
            for records in consumer.poll(timeout_ms=500, max_records=5000).values():
                out.extend(_reply_record(r.key, r.value, r.timestamp, r.headers) for r in records)
        return out
    finally:
        consumer.close()


def _reply_record(key: bytes | None, value: bytes | None, timestamp: int,
                  headers: list[tuple[str, bytes]] | None) -> ReplyRecord:
    found = dict(headers or ())
    status = "unreadable"
    if value:
        with contextlib.suppress(orjson.JSONDecodeError, AttributeError):
            status = str(orjson.loads(value).get("status"))
    compute = found.get(H_COMPUTE)
    size = found.get(H_BATCH_SIZE)
    return ReplyRecord((key or b"").decode(errors="replace"), timestamp, status,
                       float(compute) if compute else None, int(size) if size else None)
