"""The worker's one seam onto a Kafka client library: a Transport builds every client the worker and its jobs
use (the stream's source, reply sink and transactions; a plain sink; the backfill's partition reader; the
admin that reads the broker's facts) and says which of its library's exceptions mean that the broker did not
answer.

worker/core/clients.py names each client's Transport by module, one row a client; ``transport_for`` imports
the one chosen, so that neither client loads the other's library (confluent-kafka is an extra). worker/app.py
asks once and never branches on the client again.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any, Protocol, TypeVar

from worker.core.bounds import StepBounds
from worker.core.clients import check_kafka_client
from worker.core.clock import Clock
from worker.core.errors import ConfigError, ServiceUnavailable
from worker.core.sections import DeliverySettings, KafkaSettings
from worker.kafka.broker_facts import BrokerAdmin
from worker.kafka.fence_watch import Brokers
from worker.kafka.preflight import check_kafka
from worker.ports import PartitionReader, Sink, Source, Tag, Transactions

T = TypeVar("T")


class Transport(Protocol):
    """Every Kafka client the worker uses, on one client library. Each method raises ServiceUnavailable when
    no broker answers and ConfigError when the library refuses its configuration (``no_broker``)."""

    errors: tuple[type[Exception], ...]  # what the library's calls raise when the broker does not answer

    def refused(self, exc: Exception) -> bool:
        """Whether ``exc``, one of ``errors``, is the library refusing its configuration."""
        ...

    def built(self, kafka: KafkaSettings, build: Callable[[], T]) -> T:
        """``build()``, its library's errors raised as ServiceUnavailable or ConfigError (``no_broker``)."""
        ...

    def preflight(self, kafka: KafkaSettings) -> None:
        """Check at start, in seconds, that a broker answers and takes the security settings: raises
        ServiceUnavailable, or ConfigError naming the setting to fix."""
        ...

    def stream(self, kafka: KafkaSettings, delivery: DeliverySettings, bounds: StepBounds, clock: Clock,
               model_topics: tuple[str, ...]) -> tuple[Source, Sink[Tag], Transactions | None]:
        """The request source, started (subscribed to the requests topic and ``model_topics``), the reply sink
        and, for exactly-once, the transactions over both. Raises LookupError when the requests topic does not
        exist."""
        ...

    def sink(self, kafka: KafkaSettings) -> Sink[Any]:
        """A plain (not transactional) sink: of replies (tagged Tag), or of shadow records."""
        ...

    def partition_reader(self, kafka: KafkaSettings, clock: Clock, group: str | None = None) -> PartitionReader:
        """A reader of the requests topic's partitions in ``group`` (default: ``kafka.group``) that never
        subscribes."""
        ...

    def admin(self, kafka: KafkaSettings) -> BrokerAdmin:
        """What reads the broker's facts (its settings, topics and group protocols) at start."""
        ...

    def watch_admin(self, kafka: KafkaSettings, timeout_s: float, client_id: str) -> Brokers:
        """An admin client of its own that lists the cluster's brokers, each request bounded by ``timeout_s``
        (the exactly-once fence watch's, and the broker watch's for readiness). Raises ServiceUnavailable when
        no broker answers yet."""
        ...


def transport_for(kafka_client: str) -> Transport:
    """The Transport of ``kafka_client``, its library imported now. Raises ConfigError for a name not in
    worker/core/clients.py's table, or a client whose library is not installed."""
    transport: Transport = importlib.import_module(check_kafka_client(kafka_client).transport).TRANSPORT
    return transport


class Building:
    """What each client's Transport shares: its library's exceptions, raised while a client is built, said as
    the worker's (``no_broker``)."""

    errors: tuple[type[Exception], ...] = ()

    def refused(self, exc: Exception) -> bool:
        """Whether ``exc`` is the library refusing its configuration (else: no broker answered)."""
        return False

    def built(self, kafka: KafkaSettings, build: Callable[[], T]) -> T:
        """``build()``, its library's errors raised as ServiceUnavailable or ConfigError."""
        try:
            return build()
        except self.errors as exc:
            raise no_broker(kafka, exc, self.refused(exc)) from exc

    def preflight(self, kafka: KafkaSettings) -> None:
        """Kafka's own protocol over TCP, whatever the library (worker/kafka/preflight.py)."""
        check_kafka(kafka.kafka_bootstrap_servers, kafka.kafka_security)


def no_broker(kafka: KafkaSettings, exc: Exception, refused: bool) -> ServiceUnavailable | ConfigError:
    """What a client's constructor raised, as the worker says it: the client refusing its configuration
    (``refused``, as its Transport tells: a user's client property out of its range, say), or no broker
    answering."""
    if refused:
        return ConfigError(f"the {kafka.kafka_client} client refused its configuration: {exc}; check the Kafka "
                           "client properties (--consumer-property, --producer-property, docs/interop.md)")
    return ServiceUnavailable(f"no Kafka broker answers at KAFKA_BOOTSTRAP_SERVERS="
                              f"{kafka.kafka_bootstrap_servers} ({type(exc).__name__}: {exc})")
