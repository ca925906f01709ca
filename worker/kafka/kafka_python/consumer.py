"""Building kafka-python consumers the worker's way, and waiting for a topic's metadata.

Every consumer of the worker's (the stream's source, the backfill's bounded
source) commits by hand, never creates topics by consuming, and reads at most
``max_poll_records`` per poll; the adapters add what is theirs.
"""

from __future__ import annotations

from typing import Any

from kafka import KafkaConsumer
from kafka.consumer.fetcher import ConsumerRecord

from worker.core.messages import Position, RawRecord
from worker.core.sections import KafkaSettings
from worker.kafka.kafka_python.connection import client_config
from worker.kafka.metadata import wait_for


def group_consumer(kafka: KafkaSettings, **config: Any) -> KafkaConsumer:
    """A consumer in ``kafka.group`` with manual commits; ``config`` adds or overrides keys.

    Blocks up to kafka-python's bootstrap timeout; raises KafkaError when no broker answers.
    """
    return KafkaConsumer(**{
        **client_config(kafka.kafka_bootstrap_servers, kafka.kafka_security),
        "group_id": kafka.group,
        "client_id": kafka.client_id,
        "enable_auto_commit": False,
        "allow_auto_create_topics": False,
        "max_poll_records": kafka.max_poll_records,
        **config,
    })


def wait_for_partitions(consumer: KafkaConsumer, topics: dict[str, int], wait_s: float) -> dict[str, list[int]]:
    """Each topic's partitions, once the client's metadata shows at least the wanted count of each, waiting
    up to ``wait_s`` (worker/kafka/metadata.py). Raises LookupError naming the topics still missing then."""
    def found() -> dict[str, list[int]]:
        return {name: sorted(consumer.partitions_for_topic(name) or ()) for name in topics}

    def missing(partitions: dict[str, list[int]]) -> list[str]:
        return sorted(name for name, count in topics.items() if len(partitions[name]) < count)

    def complete() -> dict[str, list[int]] | None:
        partitions = found()
        return None if missing(partitions) else partitions

    return wait_for(complete, wait_s, lambda: LookupError(", ".join(missing(found()))))


def fetch(consumer: KafkaConsumer, timeout_s: float, max_records: int) -> list[ConsumerRecord]:
    """Up to ``max_records`` records of the assigned partitions, in offset order per partition. Blocks up to
    ``timeout_s``; may run rebalance callbacks."""
    fetched = consumer.poll(timeout_ms=int(timeout_s * 1000), max_records=max_records)
    return [record for records in fetched.values() for record in records]


def raw_records(records: list[ConsumerRecord], now: float) -> list[RawRecord]:
    """``records`` as the worker reads them, received at ``now`` (monotonic)."""
    return [RawRecord(Position(r.topic, r.partition, r.offset), r.key, r.value, list(r.headers or ()), r.timestamp,
                      now) for r in records]
