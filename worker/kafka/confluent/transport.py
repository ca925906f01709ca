"""The confluent-kafka Transport (worker/kafka/client_transport.py): its classes, and its refused configuration."""

from __future__ import annotations

from typing import Any

from confluent_kafka import KafkaError, KafkaException

from worker.kafka.client_transport import ClientTransport
from worker.kafka.confluent.bounded_source import ConfluentPartitionReader
from worker.kafka.confluent.broker_facts import ConfluentAdmin
from worker.kafka.confluent.connection import producer_properties
from worker.kafka.confluent.sink import ConfluentSink
from worker.kafka.confluent.source import ConfluentSource
from worker.kafka.confluent.transactions import TransactionalSink
from worker.kafka.fence_watch import Brokers


def fence_admin(*args: Any, **kwargs: Any) -> Brokers:
    """kafka-python's admin client, for the exactly-once sink's FenceWatch and the BrokerWatch of readiness:
    librdkafka's metadata requests went on to a paused broker through its whole pause (each timed out, none
    tried another broker), so that the fence was never seen, and one paused broker of a cluster would have
    looked like all of them away; kafka-python's admin gives a timed-out connection up and asks another
    broker. Imported here, so that a worker on confluent-kafka loads kafka-python (a dependency of the worker
    either way) only with exactly-once or the HTTP surface."""
    from worker.kafka.kafka_python.broker_facts import KafkaPythonAdmin
    return KafkaPythonAdmin(*args, **kwargs)


class ConfluentTransport(ClientTransport):
    NAME, errors = "confluent", (KafkaException,)
    SOURCE, SINK, TRANSACTIONAL_SINK = ConfluentSource, ConfluentSink, TransactionalSink
    READER, ADMIN, PRODUCER_PROPERTIES = ConfluentPartitionReader, ConfluentAdmin, staticmethod(producer_properties)
    FENCE_ADMIN = staticmethod(fence_admin)

    def refused(self, exc: Exception) -> bool:
        error = exc.args[0] if exc.args else None
        return isinstance(error, KafkaError) and error.code() == KafkaError._INVALID_ARG


TRANSPORT = ConfluentTransport()
