"""The memory client's BrokerAdmin (worker/kafka/broker_facts.py): the broker's topics and settings."""

from __future__ import annotations

from collections.abc import Sequence

from tests.doubles.memory_client.broker import MemoryBroker
from tests.doubles.memory_client.errors import MemoryKafkaError


class MemoryAdmin:
    ERRORS: tuple[type[Exception], ...] = (MemoryKafkaError,)

    def __init__(self, broker: MemoryBroker) -> None:
        self._broker = broker

    def topics(self) -> set[str]:
        return self._broker.topics()

    def broker_configs(self, names: Sequence[str]) -> dict[str, str]:
        """Raises LookupError for a config the broker does not have (as one older than it would)."""
        return {name: self._broker.configs[name] for name in names}

    def brokers(self) -> dict[int, str]:
        """The one broker, at its address."""
        return {1: self._broker.address}

    def close(self) -> None:
        pass
