"""The confluent-kafka Transport (worker/kafka/client_transport.py): its classes, and its refused configuration."""

from __future__ import annotations

from confluent_kafka import KafkaError, KafkaException

from worker.kafka.client_transport import ClientTransport
from worker.kafka.confluent.bounded_source import ConfluentPartitionReader
from worker.kafka.confluent.broker_facts import ConfluentAdmin
from worker.kafka.confluent.connection import producer_properties
from worker.kafka.confluent.sink import ConfluentSink
from worker.kafka.confluent.source import ConfluentSource
from worker.kafka.confluent.transactions import TransactionalSink


class ConfluentTransport(ClientTransport):
    NAME, errors = "confluent", (KafkaException,)
    SOURCE, SINK, TRANSACTIONAL_SINK = ConfluentSource, ConfluentSink, TransactionalSink
    READER, ADMIN, PRODUCER_PROPERTIES = ConfluentPartitionReader, ConfluentAdmin, staticmethod(producer_properties)

    def refused(self, exc: Exception) -> bool:
        error = exc.args[0] if exc.args else None
        return isinstance(error, KafkaError) and error.code() == KafkaError._INVALID_ARG


TRANSPORT = ConfluentTransport()
