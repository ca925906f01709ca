"""ScoringClient and AsyncScoringClient when the broker is away: at construction, while scoring, at close.

"Away" is a loopback port where nothing listens (a freshly closed one), never the shared broker stopped. A
client's reply reader stays on the real broker where a test needs a constructed client, and only its
publisher is pointed elsewhere: that is the state of a client whose broker went down after it started.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import threading
import time
from collections.abc import Iterator
from functools import partial

import pytest
from structlog.testing import capture_logs

import producer.client as client_module
import producer.transport_kafka_python as kafka_python_transport
from producer import AsyncScoringClient, ReplyTimeout, ScoringClient
from producer.ports import Headers
from producer.transport import OnDone, PublishTimeout
from worker.core.errors import ServiceUnavailable

ROW = [0.5] * 16


def closed_port() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{sock.getsockname()[1]}"


@pytest.fixture
def publisher_nowhere(monkeypatch: pytest.MonkeyPatch) -> str:
    """The clients built in the test get their publisher on a closed port (the reply reader stays on the
    broker). kafka-python's producer probes the broker's version when built (blocking up to 30 s), which a
    producer built before its broker went away had done: the probe is skipped by naming the version."""
    nowhere = closed_port()
    real_open = client_module.open_publisher

    def open_nowhere(kafka_client, _bootstrap, *args, **kwargs):
        return real_open(kafka_client, nowhere, *args, **kwargs)

    monkeypatch.setattr(client_module, "open_publisher", open_nowhere)
    monkeypatch.setattr(kafka_python_transport, "KafkaProducer",
                        partial(kafka_python_transport.KafkaProducer, api_version=(4, 0)))
    return nowhere


@pytest.mark.parametrize("kafka_client", ["kafka-python", "confluent"])
def test_without_a_broker_both_clients_fail_at_once_naming_the_address(kafka_client):
    nowhere = closed_port()
    started = time.monotonic()
    with pytest.raises(ServiceUnavailable, match=f"no Kafka broker answers at KAFKA_BOOTSTRAP_SERVERS={nowhere}"):
        ScoringClient(nowhere, "requests", kafka_client=kafka_client)
    with pytest.raises(ServiceUnavailable, match="no Kafka broker answers"):
        asyncio.run(AsyncScoringClient(nowhere, "requests", kafka_client=kafka_client).open())
    assert time.monotonic() - started < 2


def test_a_broker_that_takes_the_connection_but_never_answers_fails_the_client_after_connect_timeout_s():
    with socket.create_server(("127.0.0.1", 0)) as silent:  # the kernel accepts; nobody answers
        address = f"127.0.0.1:{silent.getsockname()[1]}"
        started = time.monotonic()
        with pytest.raises(ServiceUnavailable, match=f"the Kafka broker at {address} accepted a connection but "
                                                     "did not answer"):
            ScoringClient(address, "requests", connect_timeout_s=1.0)
        assert 0.9 < time.monotonic() - started < 3


def test_a_kafka_python_client_that_gets_no_metadata_for_its_topic_fails_after_connect_timeout_s(
        bootstrap, topics, publisher_nowhere):
    started = time.monotonic()
    with pytest.raises(ServiceUnavailable, match=f"cannot send to the requests topic: no metadata for topic "
                                                 f"'{topics.requests}' within 1 s from the brokers at "
                                                 f"{publisher_nowhere}"):
        ScoringClient(bootstrap, topics.requests, topics.replies, connect_timeout_s=1.0)
    assert 0.9 < time.monotonic() - started < 3


def test_with_its_broker_gone_confluent_times_out_within_timeout_s_logs_each_error_once_and_closes_at_once(
        bootstrap, topics, publisher_nowhere, caplog):
    pytest.importorskip("confluent_kafka")
    with capture_logs() as events, caplog.at_level(logging.INFO, logger="librdkafka"):
        client = ScoringClient(bootstrap, topics.requests, topics.replies, timeout_s=3.0, retries=2,
                               kafka_client="confluent")
        started = time.monotonic()
        with pytest.raises(ReplyTimeout, match=r"no reply for request gone-1 .* within 3 s \(3 sends\)"):
            client.score(ROW, request_id="gone-1")
        waited = time.monotonic() - started
        started = time.monotonic()
        unsent = client.close()
        closing = time.monotonic() - started
    assert 3.0 <= waited < 3.5
    assert closing < 1.5
    assert unsent == 3  # three sends, none taken
    assert [e["count"] for e in events if e["event"] == "requests_not_sent"] == [3]
    lines = [r.getMessage() for r in caplog.records] + [e["reason"] for e in events
                                                        if e["event"] == "kafka_client_error"]
    refused = [line for line in lines if "Connection refused" in line]
    assert 1 <= len(refused) <= 2, lines  # one line, or its twin from the other client when a window passed
    assert len(lines) <= 6, lines  # 827 lines in 15 s before: one per reconnect, twice


class StalledPublisher:
    """A publisher whose sends wait for metadata that never comes: kafka-python's, when it has no metadata for
    the topic and no broker answers. Records what time each send was given."""

    def __init__(self) -> None:
        self.given_s: list[float | None] = []
        self._never = threading.Event()

    def prepare(self, topic: str, timeout_s: float) -> None:
        """Pretends the metadata came at construction, as it does while the broker is up."""

    def publish(self, topic: str, key: bytes | None, value: bytes, on_done: OnDone,
                timeout_s: float | None = None, headers: Headers = ()) -> None:
        self.given_s.append(timeout_s)
        self._never.wait(timeout_s)  # stands for kafka-python's wait on metadata
        raise PublishTimeout(f"no metadata for topic {topic!r} within {timeout_s:g} s")

    def serve(self) -> None: ...

    def flush(self, timeout_s: float | None = None) -> int:
        return 0

    def close(self, timeout_s: float = 1.0) -> int:
        return 0


@pytest.fixture
def stalled(monkeypatch: pytest.MonkeyPatch) -> Iterator[StalledPublisher]:
    publisher = StalledPublisher()
    monkeypatch.setattr(client_module, "open_publisher", lambda *_args, **_kwargs: publisher)
    yield publisher


def test_a_send_that_cannot_be_made_is_bounded_by_the_requests_timeout_on_either_api(bootstrap, topics, stalled):
    with ScoringClient(bootstrap, topics.requests, topics.replies, timeout_s=30.0) as client:
        started = time.monotonic()
        with pytest.raises(ReplyTimeout, match=r"request stalled-1 could not be sent within 1.5 s"):
            client.score(ROW, request_id="stalled-1", timeout_s=1.5)
        assert time.monotonic() - started < 2.0
        assert client.in_flight == 0
        assert 1.4 < stalled.given_s[0] <= 1.5

    async def scenario() -> float:
        async with AsyncScoringClient(bootstrap, topics.requests, topics.replies, timeout_s=1.5) as client:
            started = time.monotonic()
            with pytest.raises(ReplyTimeout, match="request stalled-2 could not be sent within 1.5 s"):
                await client.score(ROW, request_id="stalled-2")
            assert client.sync.in_flight == 0
            return time.monotonic() - started

    assert asyncio.run(scenario()) < 2.0
