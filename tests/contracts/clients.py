"""The Kafka clients the contract suites run over, and the broker each one talks to.

Every row of the client table (worker/core/clients.py), on the real broker (integration), and the memory client
(tests/doubles/memory_client), on a memory broker of the test's own. A suite builds its sources and sinks through
the client's Transport (worker/kafka/transport.py), as the worker does; what it does on the broker itself (write
the records a source is to read, read what a sink wrote) it does through ``Broker``, whichever broker that is.
"""

from __future__ import annotations

import uuid
from typing import Protocol

import pytest

from tests.doubles import memory_client
from tests.doubles.memory_client.broker import MemoryBroker
from tests.integration.kit import Producer, TopicReader, Topics
from worker.core.clients import CLIENTS
from worker.core.messages import Headers

# What landed on a topic, comparable across brokers: (key, value, headers).
Landed = tuple[bytes | None, bytes | None, list[tuple[str, bytes]]]

MEMORY = memory_client.NAME
# The shipped rows (the table as imported), then the memory client's, which each test adds to the table.
CLIENT_PARAMS = [*(pytest.param(name, marks=pytest.mark.integration) for name in CLIENTS), MEMORY]


class Broker(Protocol):
    """The broker a client talks to, as the test sees it: its address, the test's fresh topics (requests and
    replies of 4 partitions, dead letters of 1), and what the test writes and reads there itself."""

    bootstrap: str
    topics: Topics

    def produce(self, topic: str, partition: int, key: bytes | None, value: bytes | None, headers: Headers) -> None:
        ...

    def flush(self) -> None:
        ...

    def landed(self, topic: str, count: int) -> list[Landed]:
        """Every record on ``topic``, once there are ``count`` (fails after 10 s)."""
        ...

    def close(self) -> None:
        ...


class RealBroker:
    def __init__(self, bootstrap: str, topics: Topics, producer: Producer) -> None:
        self.bootstrap, self.topics, self._producer = bootstrap, topics, producer

    def produce(self, topic: str, partition: int, key: bytes | None, value: bytes | None, headers: Headers) -> None:
        self._producer.send(topic, value, key=key, headers=headers, partition=partition)

    def flush(self) -> None:
        self._producer.flush()

    def landed(self, topic: str, count: int) -> list[Landed]:
        reader = TopicReader(self.bootstrap, topic)
        try:
            records = reader.read_until(lambda landed: len(landed.records) >= count, 10, f"{count} records on {topic}")
            return [(r.key, r.value, list(r.headers)) for r in records.records]
        finally:
            reader.close()

    def close(self) -> None:
        pass  # the fixtures close the producer


class InMemoryBroker:
    def __init__(self) -> None:
        self.bootstrap = f"memory-{uuid.uuid4().hex[:10]}:9092"
        self._broker = MemoryBroker.start(self.bootstrap)
        base = f"contract-{uuid.uuid4().hex[:10]}"
        self.topics = Topics(f"{base}.requests", f"{base}.replies", f"{base}.dlq")
        for topic, partitions in ((self.topics.requests, 4), (self.topics.replies, 4), (self.topics.dlq, 1)):
            self._broker.create_topic(topic, partitions)

    def produce(self, topic: str, partition: int, key: bytes | None, value: bytes | None, headers: Headers) -> None:
        self._broker.append(topic, partition, key, value, headers)

    def flush(self) -> None:
        pass  # written as produced

    def landed(self, topic: str, count: int) -> list[Landed]:
        self._broker.wait(lambda: len(self._broker.records(topic)) >= count, 10)
        return [(entry.key, entry.value, list(entry.headers)) for _, entry in self._broker.records(topic)]

    def close(self) -> None:
        self._broker.stop()


def broker_for(client: str, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Broker:
    """The broker ``client`` talks to; the memory client's row added to the table for the test."""
    if client == MEMORY:
        monkeypatch.setitem(CLIENTS, MEMORY, memory_client.CLIENT)
        return InMemoryBroker()
    pytest.importorskip(CLIENTS[client].module)  # an extra's library (confluent-kafka) may not be installed
    return RealBroker(request.getfixturevalue("bootstrap"), request.getfixturevalue("topics"),
                      request.getfixturevalue("producer"))
