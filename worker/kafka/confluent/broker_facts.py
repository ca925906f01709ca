"""The start check's admin requests (worker/kafka/broker_facts.py) over confluent-kafka's AdminClient."""

from __future__ import annotations

from collections.abc import Sequence

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType  # type: ignore[attr-defined]

from worker.core.security import KafkaSecurity
from worker.kafka.broker_facts import ADMIN_TIMEOUT_S
from worker.kafka.confluent.connection import client_config


class ConfluentAdmin:
    """A BrokerAdmin. librdkafka connects in the background: a broker that does not answer shows at the first
    request. Raises ConfigError when a password file cannot be read."""

    # TimeoutError: a future whose result is not in by the timeout.
    ERRORS: tuple[type[Exception], ...] = (KafkaException, TimeoutError)

    def __init__(self, bootstrap_servers: str, security: KafkaSecurity, timeout_s: float = ADMIN_TIMEOUT_S,
                 client_id: str = "streamscore-start-check") -> None:
        self._timeout_s = timeout_s
        self._admin = AdminClient({**client_config(bootstrap_servers, security), "client.id": client_id})

    def topics(self) -> set[str]:
        return set(self._admin.list_topics(timeout=self._timeout_s).topics)

    def broker_configs(self, names: Sequence[str]) -> dict[str, str]:
        broker_id = min(self._admin.list_topics(timeout=self._timeout_s).brokers)
        resource = ConfigResource(ResourceType.BROKER, str(broker_id))
        described = self._admin.describe_configs([resource], request_timeout=self._timeout_s)
        configs = described[resource].result(timeout=self._timeout_s)
        return {name: configs[name].value for name in names}

    def close(self) -> None:
        """Nothing to close: librdkafka's admin handle goes with its last reference."""
