"""The start check's admin requests (worker/kafka/broker_facts.py) over kafka-python's KafkaAdminClient."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kafka import KafkaAdminClient
from kafka.admin import ConfigResource, ConfigResourceType
from kafka.errors import KafkaError

from worker.core.security import KafkaSecurity
from worker.kafka.broker_facts import ADMIN_TIMEOUT_S, unavailable
from worker.kafka.kafka_python.connection import client_config


class BoundedAdminClient(KafkaAdminClient):  # type: ignore[misc]  # kafka-python has no type hints
    """A KafkaAdminClient that takes ``socket_connection_setup_timeout_ms`` and its ``_max_ms``, which
    KafkaAdminClient refuses but passes on to its connections."""

    DEFAULT_CONFIG = {**KafkaAdminClient.DEFAULT_CONFIG, "socket_connection_setup_timeout_ms": 10_000,
                      "socket_connection_setup_timeout_max_ms": 30_000}

    def __init__(self, **configs: Any) -> None:
        """Raises what KafkaAdminClient raises, having let go of what it started before its bootstrap failed
        (its IO thread and its sockets: kafka-python leaves them, a thread and four descriptors a try)."""
        try:
            super().__init__(**configs)
        except Exception:
            if hasattr(self, "_client"):
                self._client.close()
            if hasattr(self, "_net"):
                self._net.stop()
            raise


class KafkaPythonAdmin:
    """A BrokerAdmin. Built, it has reached a broker: raises ServiceUnavailable when none answers, ConfigError
    when a password file cannot be read."""

    ERRORS: tuple[type[Exception], ...] = (KafkaError,)

    def __init__(self, bootstrap_servers: str, security: KafkaSecurity, timeout_s: float = ADMIN_TIMEOUT_S,
                 client_id: str = "streamscore-start-check") -> None:
        """``timeout_s``: each request's, and each connection's set-up (a paused broker accepts the connection and
        never answers; kafka-python's own set-up timeout, 10 s doubling up to 30 s, would hold a fence watch's
        look that long); reaching a broker at first may take ADMIN_TIMEOUT_S."""
        timeout_ms = int(timeout_s * 1000)
        try:
            self._admin = BoundedAdminClient(**client_config(bootstrap_servers, security), client_id=client_id,
                                             request_timeout_ms=timeout_ms,
                                             socket_connection_setup_timeout_ms=timeout_ms,
                                             socket_connection_setup_timeout_max_ms=timeout_ms,
                                             bootstrap_timeout_ms=int(max(timeout_s, ADMIN_TIMEOUT_S) * 1000))
        except KafkaError as exc:
            raise unavailable(bootstrap_servers, exc) from None

    def topics(self) -> set[str]:
        return set(self._admin.list_topics())

    def broker_configs(self, names: Sequence[str]) -> dict[str, str]:
        broker_id = str(self._admin.describe_cluster()["brokers"][0]["broker_id"])
        described = self._admin.describe_configs([ConfigResource(ConfigResourceType.BROKER, broker_id, list(names))],
                                                 config_filter="all")
        configs = described["broker"][broker_id]
        return {name: configs[name]["value"] for name in names}

    def brokers(self) -> dict[int, str]:
        """kafka-python's DescribeCluster asks for the fenced brokers too, and marks them."""
        return {int(broker["broker_id"]): f"{broker['host']}:{broker['port']}"
                for broker in self._admin.describe_cluster()["brokers"] if not broker.get("is_fenced")}

    def close(self) -> None:
        self._admin.close()
