"""Building kafka-python consumers the worker's way, fetching, and reading what they fetched.

Every consumer of the worker's (the stream's source, the backfill's bounded
source) commits by hand, never creates topics by consuming, and reads at most
``max_poll_records`` per poll; the adapters add what is theirs.
"""

from __future__ import annotations

from typing import Any

from kafka import KafkaConsumer, OffsetAndMetadata, TopicPartition
from kafka.consumer.fetcher import ConsumerRecord

from worker.core.messages import Position, RawRecord
from worker.core.offsets import TopicPartition as TP
from worker.core.sections import KafkaSettings
from worker.kafka.kafka_python.connection import client_config, creating_no_topics
from worker.kafka.kafka_python.skipped import watch_for_skipped_requests


def group_consumer(kafka: KafkaSettings, **config: Any) -> KafkaConsumer:
    """A consumer of ``group_consumer_config``.

    Blocks up to kafka-python's bootstrap timeout; raises KafkaError when no broker answers.
    """
    watch_for_skipped_requests()
    consumer = KafkaConsumer(**group_consumer_config(kafka, **config))
    creating_no_topics(consumer._cluster)
    return consumer


def group_consumer_config(kafka: KafkaSettings, **config: Any) -> dict[str, Any]:
    """kafka-python options of a consumer in ``kafka.group`` with manual commits and the user's consumer
    properties; ``config`` adds or overrides keys."""
    return {
        **client_config(kafka.kafka_bootstrap_servers, kafka.kafka_security),
        "group_id": kafka.group,
        "client_id": kafka.client_id,
        "enable_auto_commit": False,
        "allow_auto_create_topics": False,
        "max_poll_records": kafka.max_poll_records,
        **kafka.kafka_properties.for_client("consumer", "kafka-python"),
        **config,
    }


def fetch(consumer: KafkaConsumer, timeout_s: float, max_records: int) -> list[ConsumerRecord]:
    """Up to ``max_records`` records of the assigned partitions, in offset order per partition. Blocks up to
    ``timeout_s``; may run rebalance callbacks."""
    fetched = consumer.poll(timeout_ms=int(timeout_s * 1000), max_records=max_records)
    return [record for records in fetched.values() for record in records]


def raw_records(records: list[ConsumerRecord], now: float) -> list[RawRecord]:
    """``records`` as the worker reads them, received at ``now`` (monotonic)."""
    return [RawRecord(Position(r.topic, r.partition, r.offset), r.key, r.value, r.headers or [], r.timestamp,
                      now) for r in records]


def commit_offsets(offsets: dict[TP, int]) -> dict[TopicPartition, OffsetAndMetadata]:
    """Next offsets to read as kafka-python commits them (no metadata, no leader epoch)."""
    return {TopicPartition(t, p): OffsetAndMetadata(o, "", -1) for (t, p), o in offsets.items()}


def failed_batch(consumer: KafkaConsumer) -> tuple[TopicPartition, int] | None:
    """The partition and offset of the records whose decoding just failed inside ``poll()``, or None when it
    cannot be told. kafka-python raises out of poll() without naming them; its fetcher keeps them as the
    partition records in line (kafka-python 3.x has no public accessor for it)."""
    in_line = getattr(getattr(consumer, "_fetcher", None), "_next_partition_records", None)
    if in_line is None:
        return None
    return in_line.topic_partition, int(in_line.next_fetch_offset)
