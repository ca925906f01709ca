"""The confluent-kafka Transport (worker/kafka/transport.py): every client the worker uses, on librdkafka."""

from __future__ import annotations

from typing import Any

import structlog
from confluent_kafka import KafkaError, KafkaException

from worker.core.bounds import StepBounds
from worker.core.clock import Clock
from worker.core.sections import DeliverySettings, KafkaSettings
from worker.kafka.confluent.bounded_source import ConfluentPartitionReader
from worker.kafka.confluent.broker_facts import ConfluentAdmin
from worker.kafka.confluent.connection import producer_properties
from worker.kafka.confluent.sink import ConfluentSink
from worker.kafka.confluent.source import ConfluentSource
from worker.kafka.confluent.transactions import TransactionalSink
from worker.kafka.exactly_once import ExactlyOnce
from worker.kafka.transport import Building
from worker.ports import PartitionReader, SendTag, Sink, Source, Transactions

log = structlog.get_logger(__name__)


class ConfluentTransport(Building):
    errors = (KafkaException,)

    def refused(self, exc: Exception) -> bool:
        error = exc.args[0] if exc.args else None
        return isinstance(error, KafkaError) and error.code() == KafkaError._INVALID_ARG

    def stream(self, kafka: KafkaSettings, delivery: DeliverySettings, bounds: StepBounds, clock: Clock,
               model_topics: tuple[str, ...]) -> tuple[Source, Sink[SendTag], Transactions | None]:
        source = self.built(kafka, lambda: ConfluentSource(kafka, clock, read_committed=kafka.read_committed,
                                                           metadata_s=bounds.metadata_s, model_topics=model_topics))
        transactions: ExactlyOnce[SendTag] | None = None
        sink: ConfluentSink[SendTag]
        if delivery.exactly_once:
            transactional: TransactionalSink[SendTag] = self.built(kafka, lambda: TransactionalSink(
                kafka.kafka_bootstrap_servers, kafka.client_id, delivery.transactional_id,
                security=kafka.kafka_security, max_block_s=bounds.send_block_s, transaction_s=bounds.transaction_s,
                **producer_properties(kafka)))
            sink, transactions = transactional, ExactlyOnce(transactional, source)
            log.info("exactly_once", transactional_id=delivery.transactional_id, kafka_client="confluent")
        else:
            sink = self.built(kafka, lambda: ConfluentSink(kafka.kafka_bootstrap_servers, kafka.client_id,
                                                           security=kafka.kafka_security,
                                                           max_block_s=bounds.send_block_s,
                                                           **producer_properties(kafka)))
        self.built(kafka, source.start)
        return source, sink, transactions

    def sink(self, kafka: KafkaSettings) -> Sink[Any]:
        return self.built(kafka, lambda: ConfluentSink(kafka.kafka_bootstrap_servers, kafka.client_id,
                                                       security=kafka.kafka_security, **producer_properties(kafka)))

    def partition_reader(self, kafka: KafkaSettings, clock: Clock, group: str | None = None) -> PartitionReader:
        return self.built(kafka, lambda: ConfluentPartitionReader(kafka, clock, group=group))

    def admin(self, kafka: KafkaSettings) -> ConfluentAdmin:
        return ConfluentAdmin(kafka.kafka_bootstrap_servers, kafka.kafka_security)


TRANSPORT = ConfluentTransport()
