"""The kafka-python Transport (worker/kafka/client_transport.py): its classes, and its refused configuration."""

from __future__ import annotations

from kafka.errors import KafkaConfigurationError, KafkaError

from worker.core.sections import KafkaSettings
from worker.kafka.client_transport import ClientTransport, StreamSource
from worker.kafka.kafka_python.bounded_source import KafkaPartitionReader
from worker.kafka.kafka_python.broker_facts import KafkaPythonAdmin
from worker.kafka.kafka_python.connection import producer_properties
from worker.kafka.kafka_python.sink import KafkaSink
from worker.kafka.kafka_python.source import KafkaSource
from worker.kafka.kafka_python.transactions import TransactionalSink


class KafkaPythonTransport(ClientTransport):
    NAME, errors = "kafka-python", (KafkaError,)
    SOURCE, SINK, TRANSACTIONAL_SINK = KafkaSource, KafkaSink, TransactionalSink
    READER, ADMIN, PRODUCER_PROPERTIES = KafkaPartitionReader, KafkaPythonAdmin, staticmethod(producer_properties)
    FENCE_ADMIN = KafkaPythonAdmin

    def refused(self, exc: Exception) -> bool:
        return isinstance(exc, KafkaConfigurationError)

    def _start(self, kafka: KafkaSettings, source: StreamSource) -> None:
        source.start()  # kafka-python's errors here are raised as they are, not as the worker's


TRANSPORT = KafkaPythonTransport()
