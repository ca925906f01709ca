"""The kafka-python Transport (worker/kafka/transport.py): every client the worker uses, on kafka-python."""

from __future__ import annotations

from typing import Any

import structlog
from kafka.errors import KafkaConfigurationError, KafkaError

from worker.core.bounds import StepBounds
from worker.core.clock import Clock
from worker.core.sections import DeliverySettings, KafkaSettings
from worker.kafka.exactly_once import ExactlyOnce
from worker.kafka.kafka_python.bounded_source import KafkaPartitionReader
from worker.kafka.kafka_python.broker_facts import KafkaPythonAdmin
from worker.kafka.kafka_python.connection import producer_properties
from worker.kafka.kafka_python.sink import KafkaSink
from worker.kafka.kafka_python.source import KafkaSource
from worker.kafka.kafka_python.transactions import TransactionalSink
from worker.kafka.transport import Building
from worker.ports import PartitionReader, SendTag, Sink, Source, Transactions

log = structlog.get_logger(__name__)


class KafkaPythonTransport(Building):
    errors = (KafkaError,)

    def refused(self, exc: Exception) -> bool:
        return isinstance(exc, KafkaConfigurationError)

    def stream(self, kafka: KafkaSettings, delivery: DeliverySettings, bounds: StepBounds, clock: Clock,
               model_topics: tuple[str, ...]) -> tuple[Source, Sink[SendTag], Transactions | None]:
        source = self.built(kafka, lambda: KafkaSource(kafka, clock, read_committed=kafka.read_committed,
                                                       metadata_s=bounds.metadata_s, model_topics=model_topics))
        block_ms = int(bounds.send_block_s * 1000)
        if not delivery.exactly_once:
            sink: KafkaSink[SendTag] = self.built(kafka, lambda: KafkaSink(
                kafka.kafka_bootstrap_servers, kafka.client_id, security=kafka.kafka_security, max_block_ms=block_ms,
                **producer_properties(kafka)))
            source.start()
            return source, sink, None
        transactional: TransactionalSink[SendTag] = self.built(kafka, lambda: TransactionalSink(
            kafka.kafka_bootstrap_servers, kafka.client_id, delivery.transactional_id, security=kafka.kafka_security,
            transaction_s=bounds.transaction_s, max_block_ms=block_ms, **producer_properties(kafka)))
        log.info("exactly_once", transactional_id=delivery.transactional_id)
        source.start()
        return source, transactional, ExactlyOnce(transactional, source)

    def sink(self, kafka: KafkaSettings) -> Sink[Any]:
        return self.built(kafka, lambda: KafkaSink(kafka.kafka_bootstrap_servers, kafka.client_id,
                                                   security=kafka.kafka_security, **producer_properties(kafka)))

    def partition_reader(self, kafka: KafkaSettings, clock: Clock, group: str | None = None) -> PartitionReader:
        return self.built(kafka, lambda: KafkaPartitionReader(kafka, clock, group=group))

    def admin(self, kafka: KafkaSettings) -> KafkaPythonAdmin:
        return KafkaPythonAdmin(kafka.kafka_bootstrap_servers, kafka.kafka_security)


TRANSPORT = KafkaPythonTransport()
