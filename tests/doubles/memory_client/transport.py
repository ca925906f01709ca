"""The memory client's Transport (worker/kafka/transport.py): every client the worker uses, on the memory broker
listening at ``kafka_bootstrap_servers`` (tests/doubles/memory_client/broker.py)."""

from __future__ import annotations

from typing import Any

from tests.doubles.memory_client.admin import MemoryAdmin
from tests.doubles.memory_client.broker import MemoryBroker, connect
from tests.doubles.memory_client.errors import InvalidConfiguration, MemoryKafkaError
from tests.doubles.memory_client.reader import MemoryPartitionReader
from tests.doubles.memory_client.sink import MemorySink, MemoryTransactionalSink
from tests.doubles.memory_client.source import MemorySource
from worker.core.bounds import StepBounds
from worker.core.clock import Clock
from worker.core.sections import DeliverySettings, KafkaSettings
from worker.kafka.exactly_once import ExactlyOnce
from worker.kafka.transport import Building
from worker.ports import PartitionReader, Sink, Source, Tag, Transactions


class MemoryTransport(Building):
    errors = (MemoryKafkaError,)

    def refused(self, exc: Exception) -> bool:
        return isinstance(exc, InvalidConfiguration)

    def stream(self, kafka: KafkaSettings, delivery: DeliverySettings, bounds: StepBounds, clock: Clock,
               model_topics: tuple[str, ...]) -> tuple[Source, Sink[Tag], Transactions | None]:
        broker = self._broker(kafka)
        source = MemorySource(broker, kafka, clock, read_committed=kafka.read_committed, model_topics=model_topics)
        if not delivery.exactly_once:
            sink: MemorySink[Tag] = MemorySink(broker)
            source.start()
            return source, sink, None
        transactional: MemoryTransactionalSink[Tag] = MemoryTransactionalSink(
            broker, delivery.transactional_id, call_s=bounds.transaction_call_s)
        source.start()
        return source, transactional, ExactlyOnce(transactional, source)

    def preflight(self, kafka: KafkaSettings) -> None:
        self._broker(kafka)

    def sink(self, kafka: KafkaSettings) -> Sink[Any]:
        return MemorySink(self._broker(kafka))

    def partition_reader(self, kafka: KafkaSettings, clock: Clock, group: str | None = None) -> PartitionReader:
        return MemoryPartitionReader(self._broker(kafka), kafka.requests_topic, group or kafka.group, clock)

    def admin(self, kafka: KafkaSettings) -> MemoryAdmin:
        return MemoryAdmin(self._broker(kafka))

    def watch_admin(self, kafka: KafkaSettings, timeout_s: float, client_id: str) -> MemoryAdmin:
        return MemoryAdmin(self._broker(kafka))

    def _broker(self, kafka: KafkaSettings) -> MemoryBroker:
        """The broker at the bootstrap address; raises ServiceUnavailable when none listens there."""
        return self.built(kafka, lambda: connect(kafka.kafka_bootstrap_servers))


TRANSPORT = MemoryTransport()
