"""The Sink contract (worker/ports.py), run against FakeSink and the sink of every Kafka client: each row of the
client table on the real broker, and the memory client (tests/doubles/memory_client) on its own broker, each sink
built by its client's Transport (``sink``), as the worker builds its own.

``send`` queues and never raises for a delivery that fails; ``settle``
reports each send once, in send order, with the tag it was sent with and
its error (None when the broker has the record); ``pending`` counts the
sends not reported yet. The loop acknowledges offsets from these reports
only, so a lost, reordered or unreported Delivery would lose a request.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from tests.component.fakes import FakeSink
from tests.contracts.clients import CLIENT_PARAMS, Broker, Landed, broker_for
from tests.fakes import routes_of
from worker.core.kafka_properties import KafkaProperties
from worker.core.messages import InvalidRecord, Position, RawRecord
from worker.core.sections import KafkaSettings
from worker.core.wire import decode_request, encode_dead_letter
from worker.kafka.transport import transport_for
from worker.ports import Sink

BROKER_MAX_BYTES = 1_048_588  # the broker's default message.max.bytes: a larger record is refused


class FakeSinks:
    """FakeSink: every topic exists but those in ``fail_topics``, where every send fails. It holds the component
    tests' stand-in to the contract of what it stands in for."""

    name = "fake"

    def __init__(self) -> None:
        self.topic = "requests.replies"
        self.missing_topic = "no-such-topic"
        self._sinks: list[FakeSink] = []

    def sink(self) -> Sink[object]:
        sink = FakeSink()
        sink.fail_topics = {self.missing_topic, "refused"}
        self._sinks.append(sink)
        return sink

    def refused_send(self) -> tuple[str, bytes]:
        """A send the broker refuses: (topic, value)."""
        return "refused", b"x"

    def landed(self, sink: Sink[object], topic: str, count: int) -> list[Landed]:
        assert isinstance(sink, FakeSink)
        return [(s.key, s.value, list(s.headers)) for s in sink.to(topic)]

    def close(self) -> None:
        pass


class TransportSinks:
    """The sinks of one Kafka client, built by its Transport. Through the client properties, which each client
    takes under its own names: a producer limit above the broker's (``max.request.size``), so that an oversized
    record reaches the broker and is refused there; and a send answered within 5 s (``delivery.timeout.ms``, which
    kafka-python wants above ``request.timeout.ms``), so that one to a missing topic fails within a settle on a
    client that does not create topics by sending."""

    PRODUCER = (("max.request.size", str(4 * BROKER_MAX_BYTES)), ("request.timeout.ms", "4000"),
                ("delivery.timeout.ms", "5000"))

    def __init__(self, client: str, broker: Broker) -> None:
        self.name = client
        self.topic = broker.topics.replies
        self.missing_topic = f"contract-missing-{uuid.uuid4().hex[:10]}"
        self._broker = broker
        self._kafka = KafkaSettings(kafka_bootstrap_servers=broker.bootstrap, kafka_client=client,
                                    client_id="contract-sink", kafka_properties=KafkaProperties(producer=self.PRODUCER))
        self._sinks: list[Sink[object]] = []

    def sink(self) -> Sink[object]:
        sink: Sink[object] = transport_for(self.name).sink(self._kafka)
        self._sinks.append(sink)
        return sink

    def refused_send(self) -> tuple[str, bytes]:
        return self.topic, b"x" * 2 * BROKER_MAX_BYTES

    def landed(self, sink: Sink[object], topic: str, count: int) -> list[Landed]:
        return self._broker.landed(topic, count)

    def close(self) -> None:
        for sink in self._sinks:
            sink.close(timeout_s=5)
        self._broker.close()


@pytest.fixture(params=["fake", *CLIENT_PARAMS])
def sinks(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeSinks | TransportSinks]:
    if request.param == "fake":
        made: FakeSinks | TransportSinks = FakeSinks()
    else:
        made = TransportSinks(request.param, broker_for(request.param, request, monkeypatch))
    yield made
    made.close()


def test_each_send_is_reported_once_in_send_order_with_its_tag(sinks):
    sink = sinks.sink()
    sent = [(f"k{i}".encode(), f"v{i}".encode(), [("n", str(i).encode())]) for i in range(6)]
    for i, (key, value, headers) in enumerate(sent):
        sink.send(sinks.topic, key, value, headers, tag=("tag", i))
    deliveries = sink.settle(10.0)
    assert [d.tag for d in deliveries] == [("tag", i) for i in range(6)]
    assert [d.error for d in deliveries] == [None] * 6
    assert sink.settle(10.0) == []  # reported once
    landed = sinks.landed(sink, sinks.topic, len(sent))
    assert sorted(landed) == sorted(sent)  # across partitions a topic has no one order


def test_pending_counts_the_sends_that_settle_has_not_reported(sinks):
    sink = sinks.sink()
    assert sink.pending == 0
    for i in range(3):
        sink.send(sinks.topic, None, b"v", [], tag=i)
        assert sink.pending == i + 1
    assert len(sink.settle(10.0)) == 3
    assert sink.pending == 0
    sink.send(sinks.topic, b"k", None, [], tag=3)  # a tombstone is a record like another
    assert sink.pending == 1
    assert [(d.tag, d.error) for d in sink.settle(10.0)] == [(3, None)]
    assert sink.pending == 0


def test_a_refused_send_does_not_raise_and_is_reported_failed_with_its_tag(sinks):
    sink = sinks.sink()
    sink.send(sinks.topic, b"before", b"ok", [], tag="before")
    assert [(d.tag, d.error) for d in sink.settle(10.0)] == [("before", None)]
    topic, value = sinks.refused_send()
    sink.send(topic, b"refused", value, [], tag="refused")
    assert sink.pending == 1
    (delivery,) = sink.settle(10.0)
    assert delivery.tag == "refused" and isinstance(delivery.error, Exception)
    assert sink.pending == 0


def test_a_group_delivered_whole_is_reported_once_with_its_tag_in_send_order(sinks):
    sink = sinks.sink()
    sink.send(sinks.topic, b"alone-1", b"v", [], tag="alone-1")
    grouped = [(sinks.topic, f"g{i}".encode(), f"v{i}".encode(), [("n", str(i).encode())]) for i in range(5)]
    sink.send_group(grouped, "group", lambda i: ("member", i))
    sink.send(sinks.topic, b"alone-2", b"v", [], tag="alone-2")
    assert sink.pending == 7  # a group's sends each
    assert [(d.tag, d.error) for d in sink.settle(10.0)] == [("alone-1", None), ("group", None), ("alone-2", None)]
    assert sink.pending == 0 and sink.settle(10.0) == []
    landed = sinks.landed(sink, sinks.topic, 7)
    assert sorted(landed) == sorted([(b"alone-1", b"v", []), (b"alone-2", b"v", []),
                                     *[(key, value, headers) for _, key, value, headers in grouped]])


def test_a_group_with_a_failed_send_is_reported_send_by_send_each_with_its_members_tag(sinks):
    """How a refused reply of a batch sent in one pass finds its record (worker/core/refusals.py)."""
    sink = sinks.sink()
    topic, value = sinks.refused_send()
    grouped = [(sinks.topic, b"g0", b"v0", []), (topic, b"g1", value, []), (sinks.topic, b"g2", b"v2", []),
               (sinks.missing_topic, b"g3", b"v3", [])]
    sink.send_group(grouped, "group", lambda i: ("member", i))
    deliveries = sink.settle(10.0)
    assert [d.tag for d in deliveries] == [("member", i) for i in range(4)]
    assert deliveries[0].error is None
    assert isinstance(deliveries[1].error, Exception) and isinstance(deliveries[3].error, Exception)
    # kafka-python's idempotent producer fails what follows a record refused for good, as it does sends alone
    assert deliveries[2].error is None or sinks.name == "kafka-python"
    assert sink.pending == 0


def test_a_send_to_a_topic_that_does_not_exist_is_reported_failed(sinks):
    """Not created by the send, though the broker would (auto.create.topics.enable=true, as in deploy/local and
    Kafka's default): kafka-python 3.0.12 passes no allow_auto_create_topics to its metadata requests, and the
    sink sets it where they read it (worker/kafka/kafka_python/connection.py)."""
    sink = sinks.sink()
    sink.send(sinks.topic, None, b"first", [], tag="first")
    sink.send(sinks.missing_topic, None, b"lost", [], tag="lost")
    deliveries = sink.settle(10.0)
    assert [d.tag for d in deliveries] == ["first", "lost"]
    assert deliveries[0].error is None
    assert isinstance(deliveries[1].error, Exception)


def test_the_dead_letter_of_a_keyless_tombstone_is_delivered(sinks):
    """A request record with neither key nor value goes to the dead-letter topic as the loop encodes it."""
    tombstone = RawRecord(Position("requests", 0, 7), None, None, [], 0, 0.0)
    invalid = decode_request(tombstone, routes_of(lambda inputs: inputs), 1 << 20)
    assert isinstance(invalid, InvalidRecord) and invalid.request_id is None
    key, value, headers = encode_dead_letter(invalid)
    sink = sinks.sink()
    sink.send(sinks.topic, key, value, headers, tag="dead letter")
    assert [(d.tag, d.error) for d in sink.settle(10.0)] == [("dead letter", None)]
    assert sinks.landed(sink, sinks.topic, 1) == [(key, value, headers)]


def test_send_does_not_raise_for_a_record_with_neither_key_nor_value(sinks, request):
    if sinks.name == "kafka-python":
        request.applymarker(pytest.mark.xfail(strict=True, raises=ValueError, reason=(
            "kafka-python refuses a record with neither key nor value, and KafkaSink.send lets its ValueError out "
            "(the port says send never raises); the loop never sends one: encode_dead_letter gives a keyless "
            "tombstone an empty value")))
    sink = sinks.sink()
    sink.send(sinks.topic, None, None, [], tag="neither")
    assert [d.tag for d in sink.settle(10.0)] == ["neither"]
