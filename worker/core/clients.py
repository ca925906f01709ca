"""The Kafka client libraries the worker can run on: one row a client, the only list of them.

Each row names the module whose ``TRANSPORT`` builds every client the worker uses on that library
(worker/kafka/transport.py), the package it imports, and the extra that installs that package. The
``kafka_client`` setting takes the names of this table; adding a client is one package beside
worker/kafka/kafka_python and one row here.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib.util import find_spec

from worker.core.errors import ConfigError


@dataclass(frozen=True)
class Client:
    """One Kafka client library: where its Transport is, the package it needs, the extra that installs that."""

    transport: str  # the module whose TRANSPORT builds this client's parts
    module: str  # the library's top module (checked installed when the setting is read)
    distribution: str  # the library's package on PyPI
    extra: str = ""  # the pyproject extra that installs it; "": a dependency of the project
    # What the library refuses of the group settings (worker/core/sections.py checks them at start):
    group_protocols: tuple[str, ...] = ("classic",)  # the kafka_group_protocol values it speaks (KIP-848: consumer)
    heartbeat_ms: int = 0  # a fixed heartbeat interval, which the session timeout must exceed; 0: none fixed
    poll_interval_covers_session: bool = False  # classic protocol: max.poll.interval.ms >= session.timeout.ms


CLIENTS: dict[str, Client] = {
    # kafka-python's heartbeat_interval_ms, which the worker keeps at the library's default
    "kafka-python": Client("worker.kafka.kafka_python.transport", "kafka", "kafka-python", heartbeat_ms=3_000),
    "confluent": Client("worker.kafka.confluent.transport", "confluent_kafka", "confluent-kafka", extra="confluent",
                        group_protocols=("classic", "consumer"), poll_interval_covers_session=True),
}
KAFKA_CLIENTS: tuple[str, ...] = tuple(CLIENTS)  # the clients the project ships (the producer side's choices)


def check_kafka_client(name: str, setting: str = "kafka_client") -> Client:
    """The row of ``name``, its package installed. Raises ConfigError naming the choices, or the extra to install;
    ``setting``: how the message names the setting (with its flag, where the caller has one)."""
    if name not in CLIENTS:
        *others, last = CLIENTS
        raise ConfigError(f"{setting} must be {', '.join(others)} or {last}, got {name!r}")
    client = CLIENTS[name]
    if find_spec(client.module) is None:
        install = (f"install the `{client.extra}` extra (pip install 'streamscore[{client.extra}]')" if client.extra
                   else f"pip install {client.distribution}")
        raise ConfigError(f"kafka_client={name} (--kafka-client, STREAMSCORE_KAFKA_CLIENT) needs the "
                          f"{client.distribution} package, which is not installed: {install}, or use --kafka-client "
                          "kafka-python")
    return client
