"""Building confluent-kafka consumers the worker's way, reading what they fetched, and a topic's partitions.

Every consumer of the worker's (the stream's source, the backfill's bounded
source) commits by hand (offsets are never stored for librdkafka's own
commits) and never creates topics by consuming; the adapters add what is theirs.
"""

from __future__ import annotations

from typing import Any

import structlog
from confluent_kafka import TIMESTAMP_NOT_AVAILABLE, Consumer, KafkaError, KafkaException, Message, TopicPartition

from worker.core.messages import Position, RawRecord
from worker.core.offsets import TopicPartition as TP
from worker.core.sections import KafkaSettings
from worker.kafka.confluent.connection import client_config, group_error_callback

log = structlog.get_logger(__name__)


def group_config(kafka: KafkaSettings, **config: Any) -> dict[str, Any]:
    """librdkafka properties of a consumer in ``kafka.group`` with manual commits and the user's consumer
    properties; ``config`` adds or overrides properties (pass dotted names as ``**{"auto.offset.reset": ...}``)."""
    return {
        **client_config(kafka.kafka_bootstrap_servers, kafka.kafka_security),
        "error_cb": group_error_callback(kafka.kafka_security),
        "group.id": kafka.group,
        "client.id": kafka.client_id,
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "allow.auto.create.topics": False,
        **kafka.kafka_properties.for_client("consumer", "confluent"),
        **config,
    }


def positions(offsets: dict[TP, int]) -> list[TopicPartition]:
    """Partitions with their next offsets, as librdkafka takes them."""
    return [TopicPartition(t, p, o) for (t, p), o in offsets.items()]


def partitions_of(consumer: Consumer, topic: str, timeout_s: float) -> list[int] | None:
    """The topic's partitions from the broker's metadata (one request, up to ``timeout_s``); None when it has
    none or the broker reports an error for the topic (it does not exist yet)."""
    found = consumer.list_topics(topic, timeout=timeout_s).topics.get(topic)
    if found is None or found.error is not None or not found.partitions:
        return None
    return sorted(found.partitions)


def fetch(consumer: Consumer, timeout_s: float, max_records: int) -> list[Message]:
    """Up to ``max_records`` messages (errors and end-of-partition events among them): blocks up to ``timeout_s``
    for the first, then takes those already fetched (``consume(n, timeout)`` would wait for all ``n``)."""
    first = consumer.poll(timeout_s)
    if first is None:
        return []
    fetched = [first]
    if max_records > 1:
        fetched += consumer.consume(max_records - 1, 0)
    return fetched


# A record batch this librdkafka cannot decompress: a codec it was built without, or one of a newer Kafka.
UNDECODABLE = frozenset({KafkaError._BAD_COMPRESSION, KafkaError.UNSUPPORTED_COMPRESSION_TYPE})


def undecodable(message: Message) -> bool:
    """Whether a message that carries an error reports a record batch that cannot be decoded, at its offset."""
    error = message.error()
    return error is not None and error.code() in UNDECODABLE


def join_refused(message: Message) -> bool:
    """Whether a message that carries an error says the group refused the member's join: its members use
    another assignor or protocol (librdkafka retries the join for ever)."""
    error = message.error()
    return error is not None and error.code() == KafkaError.INCONSISTENT_GROUP_PROTOCOL


def at_end(message: Message) -> bool:
    """Whether a message that carries an error is an end-of-partition event. Raises KafkaException for a fatal
    error; logs the others (librdkafka retries them itself)."""
    error = message.error()
    if error is None:
        return False
    if error.fatal():
        raise KafkaException(error)
    if error.code() == KafkaError._PARTITION_EOF:
        return True
    log.warning("kafka_consume_error", code=error.name(), reason=error.str(), topic=message.topic(),
                partition=message.partition())
    return False


def raw_record(message: Message, now: float) -> RawRecord:
    """A message without an error as the worker reads it, received at ``now`` (monotonic)."""
    kind, timestamp = message.timestamp()
    return RawRecord(Position(message.topic(), message.partition(), message.offset()),  # type: ignore[arg-type]
                     message.key(), message.value(), message.headers() or [],  # type: ignore[arg-type]
                     timestamp if kind != TIMESTAMP_NOT_AVAILABLE else -1, now)
