"""The producer side's Publisher and ReplyReader on confluent-kafka (librdkafka): ``--kafka-client confluent``.

Imported only when that client is chosen (producer/transport.py); needs the
``confluent`` extra. The connection and security settings are the worker's
(worker/kafka/confluent/connection.py), from the same KafkaSecurity, and so
are its send and fetch loops (worker/kafka/confluent/sink.py, consumer.py); their
log lines and errors go through a QuietClientLog (producer/transport_logs.py)
each, which leaves out the repeats of a broker that does not answer.
"""

from __future__ import annotations

import uuid
from functools import partial
from typing import Any, cast

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, Producer, TopicPartition

from producer.ports import CLOSE_TIMEOUT_S, Headers, OnDone, PublishTimeout, Record
from producer.transport_logs import QuietClientLog
from worker.core.security import KafkaSecurity
from worker.kafka.confluent.connection import client_config
from worker.kafka.confluent.consumer import fetch
from worker.kafka.confluent.sink import MAX_BLOCK_S, produce

MAX_RECORDS = 5000  # per poll
METADATA_TIMEOUT_S = 10.0


def quiet_config(config: dict[str, Any], quiet: QuietClientLog) -> dict[str, Any]:
    """``config`` with its log lines and errors through ``quiet``. A broker closing an idle connection is
    routine, not worth a line (``log.connection.close``); a failed connection is still reported."""
    return {**config, "logger": quiet, "error_cb": quiet.error, "log.connection.close": False}


def publisher_config(bootstrap_servers: str, security: KafkaSecurity, linger_ms: int,
                     batch_bytes: int | None) -> dict[str, Any]:
    """librdkafka producer properties: those of the worker's sink, and kafka-python's partitioner.

    librdkafka's default partitioner (CRC32 of the key) puts a key on another
    partition than kafka-python and the Java client do (murmur2): a switch of
    client would break ``--key-field``'s per-key order.
    """
    config = {**client_config(bootstrap_servers, security), "client.id": "streamscore-producer", "acks": "all",
              "enable.idempotence": True, "linger.ms": linger_ms, "allow.auto.create.topics": False,
              "partitioner": "murmur2_random"}
    if batch_bytes is not None:
        config["batch.size"] = batch_bytes
    return config


def reader_config(bootstrap_servers: str, security: KafkaSecurity, read_committed: bool) -> dict[str, Any]:
    """librdkafka consumer properties for a reader outside any group.

    librdkafka refuses a consumer without ``group.id`` even when it only
    assigns partitions; this one is never used: the reader neither joins a
    group (no ``subscribe``) nor commits.
    """
    return {**client_config(bootstrap_servers, security), "client.id": "streamscore-reply-reader",
            "group.id": f"streamscore-reply-reader-{uuid.uuid4().hex}", "enable.auto.commit": False,
            "enable.auto.offset.store": False, "allow.auto.create.topics": False,
            "isolation.level": "read_committed" if read_committed else "read_uncommitted"}


class ConfluentPublisher:
    """librdkafka's producer: it is built without a broker and queues records while it connects."""

    def __init__(self, bootstrap_servers: str, security: KafkaSecurity, linger_ms: int,
                 batch_bytes: int | None, extra: dict[str, Any] | None = None) -> None:
        """``extra``: more librdkafka properties, which win over these."""
        self._quiet = QuietClientLog("streamscore-producer")
        config = {**publisher_config(bootstrap_servers, security, linger_ms, batch_bytes), **(extra or {})}
        self._producer = Producer(quiet_config(config, self._quiet))

    def prepare(self, topic: str, timeout_s: float) -> None:
        """Nothing to wait for: librdkafka fetches the metadata while records wait in its queue."""

    def publish(self, topic: str, key: bytes | None, value: bytes, on_done: OnDone,
                timeout_s: float | None = None, headers: Headers = ()) -> None:
        """Also serves the delivery reports due; waits (serving them) up to ``timeout_s`` (None: MAX_BLOCK_S)
        for room in a full queue."""
        limit = MAX_BLOCK_S if timeout_s is None else timeout_s
        try:
            produce(self._producer, topic, key, value, partial(_delivered, on_done), list(headers) or None,
                    max_block_s=limit)
        except BufferError:  # the queue stayed full
            raise PublishTimeout(f"librdkafka's send queue stayed full for {limit:g} s (is the broker "
                                 "taking records?)") from None
        self._producer.poll(0)

    def serve(self) -> None:
        self._producer.poll(0)

    def flush(self, timeout_s: float | None = None) -> int:
        return self._producer.flush(-1 if timeout_s is None else timeout_s)

    def close(self, timeout_s: float = CLOSE_TIMEOUT_S) -> int:
        """What is left after the flush is purged: its delivery reports (errors) are served here."""
        unanswered = self._producer.flush(timeout_s)
        if unanswered:
            self._producer.purge()
            self._producer.poll(0)
        close = getattr(self._producer, "close", None)  # not in the oldest confluent-kafka we take
        if close is not None:
            close()
        self._quiet.close()
        return unanswered


def _delivered(on_done: OnDone, error: KafkaError | None, message: Message) -> None:
    if error is not None:
        on_done(None, KafkaException(error))
    else:
        on_done(message.partition(), None)


class ConfluentReplyReader:
    def __init__(self, bootstrap_servers: str, security: KafkaSecurity, read_committed: bool,
                 extra: dict[str, Any] | None = None) -> None:
        self._quiet = QuietClientLog("streamscore-reply-reader")
        config = {**reader_config(bootstrap_servers, security, read_committed), **(extra or {})}
        self._consumer = Consumer(quiet_config(config, self._quiet))

    def partitions(self, topic: str) -> list[int]:
        """Raises KafkaException when the metadata says something other than "no such topic" (not authorised)."""
        metadata = self._consumer.list_topics(topic, timeout=METADATA_TIMEOUT_S).topics.get(topic)
        if metadata is None:
            return []
        if metadata.error is not None:
            if metadata.error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
                return []
            raise KafkaException(metadata.error)
        return sorted(metadata.partitions)

    def follow_from_end(self, topic: str, partitions: list[int]) -> None:
        """The end of each partition is asked of its leader now: an OFFSET_END assignment would be resolved only
        at the first fetch, after which an early reply would already be behind it."""
        ends = [TopicPartition(topic, p, self._consumer.get_watermark_offsets(
                    TopicPartition(topic, p), timeout=METADATA_TIMEOUT_S, cached=False)[1])
                for p in partitions]
        self._consumer.assign(ends)

    def poll(self, timeout_s: float) -> list[Record]:
        """Raises KafkaException for a fatal consumer error; others (librdkafka retries them) are skipped."""
        records = []
        for message in fetch(self._consumer, timeout_s, MAX_RECORDS):
            error = message.error()
            if error is None:
                headers = cast(list[tuple[str, bytes]], message.headers() or [])  # a list, as consumed
                records.append(Record(message.key(), message.value(), headers, message.timestamp()[1]))
            elif error.fatal():
                raise KafkaException(error)
        return records

    def close(self) -> None:
        self._consumer.close()
        self._quiet.close()
