"""The Source contract (worker/ports.py), run against FakeSource and the source of every Kafka client: each row of
the client table on the real broker, and the memory client (tests/doubles/memory_client) on its own broker, each
source built by its client's Transport (``stream``), as the worker builds it.

What the stream loop relies on: records come in offset order per partition
with their position, key, value and headers; a paused source gives nothing
while it is polled and resumes where it stopped; committed offsets are where
the next member of the group starts; a member that loses partitions to a new
member says which (take_revoked, after polling) and its generation changes.
Waits are on conditions, timed by the backend's clock (a FakeSource's clock
moves by each idle poll's timeout).
"""

from __future__ import annotations

import threading
import uuid
from collections import defaultdict
from collections.abc import Callable, Iterator

import pytest

from tests.component.fakes import FakeSource
from tests.contracts.clients import CLIENT_PARAMS, Broker, broker_for
from tests.fakes import FakeClock
from worker.core.bounds import step_bounds
from worker.core.clock import SystemClock
from worker.core.messages import Headers, RawRecord
from worker.core.offsets import TopicPartition as TP
from worker.core.sections import DeliverySettings, KafkaSettings, OperationsSettings
from worker.kafka.transport import transport_for
from worker.ports import Sink, Source

PARTITIONS = 4
WAIT_S = 20.0  # the longest a condition may take on a real broker (a rebalance takes a heartbeat or two)


class FakeSources:
    """FakeSource, which is its own broker: a later member is a FakeSource over the first one's log and
    committed offsets, consuming from those offsets (what FakeSource.rewind gives). It holds the component
    tests' stand-in to the contract of what it stands in for."""

    name = "fake"

    def __init__(self) -> None:
        self.clock = FakeClock()
        self.topic = "requests"
        self._first = FakeSource(self.clock, self.topic)
        self._members: list[FakeSource] = []

    def produce(self, partition: int, key: bytes | None, value: bytes, headers: Headers) -> None:
        self._first.produce(value, key=key, partition=partition, headers=headers)

    def flush(self) -> None:
        pass

    def member(self) -> Source:
        """A new member of the test's group, started."""
        if not self._members:
            member = self._first
        else:
            member = FakeSource(self.clock, self.topic)
            member.log, member.next_offset, member.committed = (self._first.log, self._first.next_offset,
                                                                self._first.committed)
            member.rewind()
        self._members.append(member)
        return member

    def close(self) -> None:
        pass


class TransportSources:
    """The sources of one Kafka client, each a member of the test's own group, built by the client's Transport
    as the worker builds its own (``stream``: started, with a reply sink beside it, closed with it). The session
    timeout is the broker's least (6 s), so that a member that stopped polling is not waited for long; a
    rebalance itself takes up to a heartbeat interval (3 s, both real libraries' default: neither source sets
    it)."""

    def __init__(self, client: str, broker: Broker) -> None:
        self.name = client
        self.clock = SystemClock()
        self.topic = broker.topics.requests
        self._broker = broker
        self._transport = transport_for(client)
        self._members: list[Source] = []
        self._sinks: list[Sink[object]] = []

    def produce(self, partition: int, key: bytes | None, value: bytes, headers: Headers) -> None:
        self._broker.produce(self.topic, partition, key, value, headers)

    def flush(self) -> None:
        self._broker.flush()

    def member(self) -> Source:
        kafka = KafkaSettings(kafka_bootstrap_servers=self._broker.bootstrap, requests_topic=self.topic,
                              group=f"{self.topic}.contract", kafka_client=self.name,
                              client_id=f"contract-{len(self._members)}", session_timeout_ms=6_000,
                              max_poll_interval_ms=10_000)
        member, sink, _ = self._transport.stream(kafka, DeliverySettings(), step_bounds(kafka, OperationsSettings()),
                                                 self.clock, ())
        self._members.append(member)
        self._sinks.append(sink)
        return member

    def close(self) -> None:
        for member in self._members:
            member.close()  # a second close of a closed consumer does nothing
        for sink in self._sinks:
            sink.close(5.0)
        self._broker.close()


@pytest.fixture(params=["fake", *CLIENT_PARAMS])
def sources(request: pytest.FixtureRequest,
            monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeSources | TransportSources]:
    if request.param == "fake":
        made: FakeSources | TransportSources = FakeSources()
    else:
        made = TransportSources(request.param, broker_for(request.param, request, monkeypatch))
    yield made
    made.close()


def fake_cannot(sources: FakeSources | TransportSources, request: pytest.FixtureRequest, reason: str) -> None:
    if sources.name == "fake":
        request.applymarker(pytest.mark.xfail(strict=True, reason=reason))


def produce_numbered(sources: FakeSources | TransportSources, per_partition: dict[int, int]) -> None:
    """``per_partition[p]`` records on each partition p; record i of p has key p-i, value v-p-i, header n=i."""
    for partition, count in per_partition.items():
        for i in range(count):
            sources.produce(partition, f"{partition}-{i}".encode(), f"v-{partition}-{i}".encode(),
                            [("n", str(i).encode())])
    sources.flush()


def poll_until(sources: FakeSources | TransportSources, source: Source, done: Callable[[list[RawRecord]], bool],
               what: str, max_records: int = 500) -> list[RawRecord]:
    """Poll until ``done(everything polled so far)``; fail after WAIT_S on the backend's clock."""
    polled: list[RawRecord] = []
    deadline = sources.clock.monotonic() + WAIT_S
    while not done(polled):
        if sources.clock.monotonic() > deadline:
            raise AssertionError(f"timed out after {WAIT_S} s waiting for {what}; polled "
                                 f"{sorted(r.position for r in polled)}")
        polled += source.poll(0.1, max_records)
    return polled


def by_partition(records: list[RawRecord]) -> dict[int, list[int]]:
    offsets: dict[int, list[int]] = defaultdict(list)
    for record in records:
        offsets[record.position.partition].append(record.position.offset)
    return dict(offsets)


def test_records_come_in_offset_order_per_partition_with_their_key_value_and_headers(sources):
    counts = {0: 5, 1: 3, 3: 4}
    produce_numbered(sources, counts)
    source = sources.member()
    polled = poll_until(sources, source, lambda got: len(got) >= 12, "12 records", max_records=2)
    assert by_partition(polled) == {p: list(range(n)) for p, n in counts.items()}
    for record in polled:
        partition, offset = record.position.partition, record.position.offset
        assert record.position.topic == sources.topic
        assert (record.key, record.value) == (f"{partition}-{offset}".encode(), f"v-{partition}-{offset}".encode())
        assert list(record.headers) == [("n", str(offset).encode())]
    assert source.poll(0.2, 500) == []  # each record once


def test_a_paused_source_gives_nothing_while_polled_then_resumes_where_it_stopped(sources):
    produce_numbered(sources, {0: 10})
    source = sources.member()
    first = poll_until(sources, source, lambda got: len(got) >= 1, "the first record", max_records=3)
    source.pause(True)
    for _ in range(5):
        assert source.poll(0.1, 500) == []
    source.pause(False)
    rest = poll_until(sources, source, lambda got: len(first) + len(got) >= 10, "the other records")
    assert by_partition(first + rest) == {0: list(range(10))}


def test_a_new_member_starts_from_the_committed_offsets(sources):
    produce_numbered(sources, {0: 6, 2: 4})
    first = sources.member()
    poll_until(sources, first, lambda got: len(got) >= 10, "all 10 records")
    first.commit({(sources.topic, 0): 4, (sources.topic, 2): 1})  # next offsets to read
    first.close()
    second = sources.member()
    polled = poll_until(sources, second, lambda got: len(got) >= 5, "the 5 uncommitted records")
    assert by_partition(polled) == {0: [4, 5], 2: [1, 2, 3]}


def test_an_asynchronous_commit_is_answered_by_a_later_poll_and_holds_for_a_new_member(sources):
    produce_numbered(sources, {0: 6, 2: 4})
    first = sources.member()
    poll_until(sources, first, lambda got: len(got) >= 10, "all 10 records")
    answers: list[Exception | None] = []
    first.commit_async({(sources.topic, 0): 3, (sources.topic, 2): 2}, answers.append)
    deadline = sources.clock.monotonic() + WAIT_S
    while not answers and sources.clock.monotonic() < deadline:
        assert first.poll(0.1, 500) == []
    assert answers == [None]
    first.close()
    second = sources.member()
    polled = poll_until(sources, second, lambda got: len(got) >= 5, "the 5 uncommitted records")
    assert by_partition(polled) == {0: [3, 4, 5], 2: [2, 3]}


class Member(threading.Thread):
    """Polls a source on a thread of its own, as another worker process would, noting the partitions it got."""

    def __init__(self, source: Source) -> None:
        super().__init__(daemon=True)
        self.source = source
        self._stopping = threading.Event()
        self._lock = threading.Lock()
        self._taken: set[TP] = set()

    def run(self) -> None:
        while not self._stopping.is_set():
            records = self.source.poll(0.1, 500)
            with self._lock:
                self._taken |= {(r.position.topic, r.position.partition) for r in records}

    def taken(self) -> set[TP]:
        with self._lock:
            return set(self._taken)

    def stop(self) -> None:
        self._stopping.set()
        self.join(timeout=10)


def test_partitions_moved_to_a_joining_member_are_reported_revoked_and_the_generation_changes(sources, request):
    fake_cannot(sources, request, "FakeSource has no consumer group: a second FakeSource takes nothing from the "
                "first, which reports revocations and changes generation only when a test sets them")
    produce_numbered(sources, dict.fromkeys(range(PARTITIONS), 2))
    first = sources.member()
    poll_until(sources, first, lambda got: len(by_partition(got)) == PARTITIONS, "the first member to own all")
    assert first.take_revoked() == set()
    generation = first.generation()
    # Each member polls on a thread of its own, as workers do. kafka-python 3.0.12 throws away a join that
    # completes while its member is outside poll() and joins again: with both polled in turn on one thread,
    # the leader's join completes during the other's poll, every time, and the group never settles.
    second = Member(sources.member())
    second.start()
    try:
        revoked: set[TP] = set()
        deadline = sources.clock.monotonic() + WAIT_S
        while not (revoked and revoked == second.taken() and first.generation() != generation):
            assert sources.clock.monotonic() < deadline, (
                f"no handover after {WAIT_S} s: revoked={revoked}, taken by the second={second.taken()}")
            first.poll(0.1, 500)  # rebalances happen inside poll() only
            revoked |= first.take_revoked()
    finally:
        second.stop()
    assert revoked < {(sources.topic, p) for p in range(PARTITIONS)}  # the first member kept some
    assert first.generation() == second.source.generation()


def test_the_topics_on_the_broker_include_the_requests_topic(sources):
    source = sources.member()
    assert sources.topic in source.list_topics()
    assert f"contract-never-created-{uuid.uuid4().hex[:8]}" not in source.list_topics()


def test_lag_counts_the_records_of_a_partition_not_consumed_yet(sources):
    produce_numbered(sources, {0: 10})
    source = sources.member()
    first = poll_until(sources, source, lambda got: len(got) >= 3, "3 records", max_records=3)
    lag = source.lag()
    assert lag[(sources.topic, 0)] == 10 - len(first)
    assert all(behind >= 0 for behind in lag.values())
    poll_until(sources, source, lambda got: len(first) + len(got) >= 10, "the other records")
    assert source.lag()[(sources.topic, 0)] == 0
