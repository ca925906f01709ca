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
from worker.kafka.transport import no_broker
from worker.ports import PartitionReader, SendTag, Sink, Source, Transactions

log = structlog.get_logger(__name__)


class ConfluentTransport:
    errors: tuple[type[Exception], ...] = (KafkaException,)

    def stream(self, kafka: KafkaSettings, delivery: DeliverySettings, bounds: StepBounds, clock: Clock,
               model_topics: tuple[str, ...]) -> tuple[Source, Sink[SendTag], Transactions | None]:
        transactions: ExactlyOnce[SendTag] | None = None
        try:
            source = ConfluentSource(kafka, clock, read_committed=kafka.read_committed,
                                     metadata_s=bounds.metadata_s, model_topics=model_topics)
            sink: ConfluentSink[SendTag]
            if delivery.exactly_once:
                transactional: TransactionalSink[SendTag] = TransactionalSink(
                    kafka.kafka_bootstrap_servers, kafka.client_id, delivery.transactional_id,
                    security=kafka.kafka_security, max_block_s=bounds.send_block_s,
                    transaction_s=bounds.transaction_s, **producer_properties(kafka))
                sink, transactions = transactional, ExactlyOnce(transactional, source)
                log.info("exactly_once", transactional_id=delivery.transactional_id, kafka_client="confluent")
            else:
                sink = ConfluentSink(kafka.kafka_bootstrap_servers, kafka.client_id,
                                     security=kafka.kafka_security, max_block_s=bounds.send_block_s,
                                     **producer_properties(kafka))
            source.start()
        except KafkaException as exc:
            raise _no_broker(kafka, exc) from exc
        return source, sink, transactions

    def sink(self, kafka: KafkaSettings) -> Sink[Any]:
        try:
            return ConfluentSink(kafka.kafka_bootstrap_servers, kafka.client_id, security=kafka.kafka_security,
                                 **producer_properties(kafka))
        except KafkaException as exc:
            raise _no_broker(kafka, exc) from exc

    def partition_reader(self, kafka: KafkaSettings, clock: Clock, group: str | None = None) -> PartitionReader:
        try:
            return ConfluentPartitionReader(kafka, clock, group=group)
        except KafkaException as exc:
            raise _no_broker(kafka, exc) from exc

    def admin(self, kafka: KafkaSettings) -> ConfluentAdmin:
        return ConfluentAdmin(kafka.kafka_bootstrap_servers, kafka.kafka_security)


def _no_broker(kafka: KafkaSettings, exc: KafkaException) -> Exception:
    error = exc.args[0] if exc.args else None
    return no_broker(kafka, exc, refused=isinstance(error, KafkaError) and error.code() == KafkaError._INVALID_ARG)


TRANSPORT = ConfluentTransport()
