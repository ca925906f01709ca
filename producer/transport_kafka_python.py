"""The producer side's Publisher and ReplyReader on kafka-python (the default client)."""

from __future__ import annotations

from typing import Any

from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from producer.transport import OnDone, Record
from worker.core.security import KafkaSecurity
from worker.kafka.connection import client_config

MAX_RECORDS = 5000  # per poll


class KafkaPythonPublisher:
    """kafka-python's KafkaProducer: idempotent and acks=all by default; murmur2 is its default partitioner."""

    def __init__(self, bootstrap_servers: str, security: KafkaSecurity, linger_ms: int,
                 batch_bytes: int | None) -> None:
        sizing = {} if batch_bytes is None else {"batch_size": batch_bytes}
        self._producer = KafkaProducer(**client_config(bootstrap_servers, security), acks="all", linger_ms=linger_ms,
                                       allow_auto_create_topics=False, **sizing)

    def publish(self, topic: str, key: bytes | None, value: bytes, on_done: OnDone) -> None:
        sent = self._producer.send(topic, key=key, value=value)
        sent.add_callback(_taken, on_done)
        sent.add_errback(_lost, on_done)

    def serve(self) -> None:
        """Nothing to do: kafka-python runs the callbacks on its IO thread."""

    def flush(self) -> None:
        self._producer.flush()

    def close(self) -> None:
        self._producer.close()


def _taken(on_done: OnDone, metadata: Any) -> None:
    on_done(metadata.partition, None)


def _lost(on_done: OnDone, error: BaseException) -> None:
    on_done(None, error)


class KafkaPythonReplyReader:
    def __init__(self, bootstrap_servers: str, security: KafkaSecurity, read_committed: bool) -> None:
        self._consumer = KafkaConsumer(**client_config(bootstrap_servers, security), enable_auto_commit=False,
                                       group_id=None,
                                       isolation_level="read_committed" if read_committed else "read_uncommitted")

    def partitions(self, topic: str) -> list[int]:
        return sorted(self._consumer.partitions_for_topic(topic) or ())

    def follow_from_end(self, topic: str, partitions: list[int]) -> None:
        assigned = [TopicPartition(topic, p) for p in partitions]
        self._consumer.assign(assigned)
        self._consumer.seek_to_end(*assigned)
        for tp in assigned:
            self._consumer.position(tp)  # resolve "end" now, before any request is sent

    def poll(self, timeout_s: float) -> list[Record]:
        polled = self._consumer.poll(timeout_ms=int(timeout_s * 1000), max_records=MAX_RECORDS)
        return [Record(r.key, r.value, list(r.headers or ()), r.timestamp) for records in polled.values()
                for r in records]

    def close(self) -> None:
        self._consumer.close()
