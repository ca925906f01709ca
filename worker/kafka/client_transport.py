"""A Transport (worker/kafka/transport.py) over one client library's classes, which take the same arguments on
either library: the stream's parts, a plain sink, the backfill's reader and the start check's admin are built
alike. A client's transport (kafka_python/transport.py, confluent/transport.py) names its classes and tells its
library's errors apart."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar, Protocol

import structlog

from worker.core.bounds import SEND_BLOCK_S, StepBounds
from worker.core.clock import Clock
from worker.core.sections import DeliverySettings, KafkaSettings
from worker.kafka.broker_facts import BrokerAdmin
from worker.kafka.exactly_once import ExactlyOnce
from worker.kafka.fence_watch import LOOK_TIMEOUT_S, Brokers, FenceWatch
from worker.kafka.sends import LedgerSink
from worker.kafka.transactional import TransactionalSends
from worker.kafka.transport import Building
from worker.ports import PartitionReader, RewindableSource, Sink, Source, Tag, Transactions

log = structlog.get_logger(__name__)


class StreamSource(Source, RewindableSource, Protocol):
    def start(self, wait_s: float = ...) -> None: ...


class ClientTransport(Building):
    """Every client the worker uses, from the classes a client's transport sets below."""

    NAME: ClassVar[str]  # as the kafka_client setting names the client
    SOURCE: ClassVar[Callable[..., StreamSource]]
    SINK: ClassVar[Callable[..., LedgerSink[Any, Any]]]
    TRANSACTIONAL_SINK: ClassVar[Callable[..., TransactionalSends[Tag]]]
    READER: ClassVar[Callable[..., PartitionReader]]
    ADMIN: ClassVar[Callable[..., BrokerAdmin]]
    FENCE_ADMIN: ClassVar[Callable[..., Brokers]]  # watch_admin's: the FenceWatch's and the BrokerWatch's
    PRODUCER_PROPERTIES: ClassVar[Callable[..., dict[str, Any]]]  # of KafkaSettings: the replies' codec, the user's

    def stream(self, kafka: KafkaSettings, delivery: DeliverySettings, bounds: StepBounds, clock: Clock,
               model_topics: tuple[str, ...]) -> tuple[Source, Sink[Tag], Transactions | None]:
        source = self.built(kafka, lambda: self.SOURCE(kafka, clock, read_committed=kafka.read_committed,
                                                       metadata_s=bounds.metadata_s, model_topics=model_topics))
        transactions: ExactlyOnce | None = None
        sink: LedgerSink[Tag, Any]
        if delivery.exactly_once:
            fences = self._fence_watch(kafka)
            transactional = self.built(kafka, lambda: self.TRANSACTIONAL_SINK(
                kafka.kafka_bootstrap_servers, kafka.client_id, delivery.transactional_id,
                security=kafka.kafka_security, max_block_s=bounds.send_block_s, transaction_s=bounds.transaction_s,
                call_s=bounds.transaction_call_s, fences=fences,
                **self.PRODUCER_PROPERTIES(kafka)))
            sink, transactions = transactional, ExactlyOnce(transactional, source)
            log.info("exactly_once", transactional_id=delivery.transactional_id, kafka_client=self.NAME)
        else:
            sink = self._sink(kafka, bounds.send_block_s)
        self._start(kafka, source)
        return source, sink, transactions

    def _fence_watch(self, kafka: KafkaSettings) -> FenceWatch:
        """A watch over an admin client of its own, each look bounded by LOOK_TIMEOUT_S, that knows the brokers
        from the start."""
        admin = self.watch_admin(kafka, LOOK_TIMEOUT_S, f"{kafka.client_id}-fences")
        fences = FenceWatch(admin.brokers, admin.ERRORS)
        fences.look()
        return fences

    def _start(self, kafka: KafkaSettings, source: StreamSource) -> None:
        self.built(kafka, source.start)

    def sink(self, kafka: KafkaSettings) -> Sink[Any]:
        return self._sink(kafka, SEND_BLOCK_S)

    def _sink(self, kafka: KafkaSettings, max_block_s: float) -> LedgerSink[Any, Any]:
        return self.built(kafka, lambda: self.SINK(kafka.kafka_bootstrap_servers, kafka.client_id,
                                                   security=kafka.kafka_security, max_block_s=max_block_s,
                                                   **self.PRODUCER_PROPERTIES(kafka)))

    def partition_reader(self, kafka: KafkaSettings, clock: Clock, group: str | None = None) -> PartitionReader:
        return self.built(kafka, lambda: self.READER(kafka, clock, group=group))

    def admin(self, kafka: KafkaSettings) -> BrokerAdmin:
        return self.ADMIN(kafka.kafka_bootstrap_servers, kafka.kafka_security)

    def watch_admin(self, kafka: KafkaSettings, timeout_s: float, client_id: str) -> Brokers:
        return self.built(kafka, lambda: self.FENCE_ADMIN(kafka.kafka_bootstrap_servers, kafka.kafka_security,
                                                          timeout_s=timeout_s, client_id=client_id))
