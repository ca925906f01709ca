"""The bench's own Kafka clients reach the brokers with the security settings of the environment
(``KAFKA_SECURITY_PROTOCOL``, ``KAFKA_SASL_*``, ``KAFKA_SSL_*``), as the workers and contenders it starts do:
they inherit the same environment."""

from __future__ import annotations

from typing import Any

from worker.core.security import KafkaSecurity
from worker.kafka.kafka_python.connection import client_config


def env_security() -> KafkaSecurity:
    return KafkaSecurity.from_sources()


def connection(bootstrap: str) -> dict[str, Any]:
    """kafka-python options for ``bootstrap`` with the environment's security settings."""
    return client_config(bootstrap, env_security())
