"""The producer side's one seam onto a Kafka client library: a Publisher and a ReplyReader (producer/ports.py).

ScoringClient, bulk sends (producer/send.py) and the bench's load generator
talk to these two protocols only; ``open_publisher`` and ``open_reply_reader``
build them on kafka-python (producer/transport_kafka_python.py) or on
confluent-kafka (producer/transport_confluent.py), the same choice as the
worker's ``--kafka-client``. confluent-kafka is an extra: its module is
imported only when it is chosen.
"""

from __future__ import annotations

from producer.ports import CLOSE_TIMEOUT_S, OnDone, Publisher, PublishTimeout, Record, ReplyReader
from worker.core.kafka_properties import KafkaProperties
from worker.core.security import KafkaSecurity
from worker.core.settings import KAFKA_CLIENTS, check_kafka_client

__all__ = ["CLOSE_TIMEOUT_S", "KAFKA_CLIENTS", "OnDone", "PublishTimeout", "Publisher", "Record", "ReplyReader",
           "open_publisher", "open_reply_reader"]


def open_publisher(kafka_client: str, bootstrap_servers: str, security: KafkaSecurity, *, linger_ms: int = 5,
                   batch_bytes: int | None = None, properties: KafkaProperties = KafkaProperties()) -> Publisher:
    """A Publisher on ``kafka_client`` (kafka-python or confluent); ``batch_bytes``: the most bytes of one
    partition's batch (default: the library's, 16 KiB on kafka-python, 1 MB on librdkafka); ``properties``: the
    user's producer properties by Java name (worker/core/kafka_properties.py), which win over these. Raises
    ConfigError for another name, for confluent without the confluent-kafka package, or for a property refused."""
    check_kafka_client(kafka_client)
    properties.check(kafka_client)
    extra = properties.for_client("producer", kafka_client)
    if kafka_client == "confluent":
        from producer.transport_confluent import ConfluentPublisher

        return ConfluentPublisher(bootstrap_servers, security, linger_ms, batch_bytes, extra)
    from producer.transport_kafka_python import KafkaPythonPublisher

    return KafkaPythonPublisher(bootstrap_servers, security, linger_ms, batch_bytes, extra)


def open_reply_reader(kafka_client: str, bootstrap_servers: str, security: KafkaSecurity, *,
                      read_committed: bool = False, properties: KafkaProperties = KafkaProperties()) -> ReplyReader:
    """A ReplyReader on ``kafka_client``; ``read_committed`` skips records of open and aborted transactions;
    ``properties``: the user's consumer properties by Java name. Raises ConfigError as ``open_publisher`` does."""
    check_kafka_client(kafka_client)
    properties.check(kafka_client)
    extra = properties.for_client("consumer", kafka_client)
    if kafka_client == "confluent":
        from producer.transport_confluent import ConfluentReplyReader

        return ConfluentReplyReader(bootstrap_servers, security, read_committed, extra)
    from producer.transport_kafka_python import KafkaPythonReplyReader

    return KafkaPythonReplyReader(bootstrap_servers, security, read_committed, extra)
