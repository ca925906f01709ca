"""Generated records through a real worker on real Kafka and Redis, on both clients and in both delivery
modes: each record ends as exactly one reply, one dead letter or a counted duplicate.

One worker per (client, mode) serves every generated example, on topics of its own. Each example's
records go round the four partitions, followed by a marker request on each partition; once the four
markers are answered, everything before them is. Every reply and dead letter names its source offset
(headers), so the invariant is checked per record: at most one output each, and a record with none
is a duplicate, which means its id (read as the worker reads it) was answered from another record.
"""

from __future__ import annotations

import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka import KafkaProducer

from tests.component.test_fuzz import records
from tests.fakes import routes_of
from tests.integration.kit import STARTED, TopicReader, Topics, start_worker, wait_until
from worker.core.messages import Position, RawRecord, Request
from worker.core.wire import decode_request
from worker.models.churn import churn_model

PREPARE = routes_of(churn_model().prepare)
PARTITIONS = 4


class Fleet:
    """A worker on its topics, a producer, and readers of what it sent, for many examples."""

    def __init__(self, bootstrap, redis_url, tmp_path, kafka_client, delivery):
        self.topics = Topics.create(bootstrap, partitions=PARTITIONS)
        self.worker = start_worker(bootstrap, redis_url, self.topics, tmp_path, "--kafka-client", kafka_client,
                                   "--delivery", delivery, "--max-wait-ms", "5")
        self.producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=1)
        committed = delivery == "exactly-once"
        self.replies = TopicReader(bootstrap, self.topics.replies, read_committed=committed)
        self.dead = TopicReader(bootstrap, self.topics.dlq)
        self.sent: dict[tuple[int, int], str | None] = {}  # (partition, offset) -> the id the worker reads

    def outputs(self) -> dict[tuple[int, int], list]:
        found: dict[tuple[int, int], list] = {}
        for record in self.replies.read(0.05).records + self.dead.read(0.05).records:
            headers = dict(record.headers)
            place = (int(headers["source-partition"]), int(headers["source-offset"]))
            found.setdefault(place, []).append(record)
        return found

    def send(self, value, key, headers, partition) -> tuple[int, int]:
        metadata = self.producer.send(self.topics.requests, value=value, key=key, headers=headers,
                                      partition=partition).get(timeout=30)
        return metadata.partition, metadata.offset


@pytest.fixture(scope="module", params=[(c, d) for c in ("kafka-python", "confluent")
                                        for d in ("at-least-once", "exactly-once")],
                ids=lambda p: f"{p[0]}-{p[1]}")
def fleet(request, services, tmp_path_factory):
    kafka_client, delivery = request.param
    if kafka_client == "confluent":
        pytest.importorskip("confluent_kafka")
    fleet = Fleet(*services, tmp_path_factory.mktemp("fuzz"), kafka_client, delivery)
    STARTED.remove(fleet.worker.process)  # it serves every example: not a leftover of one test
    try:
        yield fleet
        assert fleet.worker.process.poll() is None, fleet.worker.log()
        fleet.worker.stop()
    finally:
        fleet.producer.close()
        if fleet.worker.process.poll() is None:
            fleet.worker.kill()


def reads_as(value, key, headers) -> str | None:
    """The request id the worker reads from a record, or None (a dead letter)."""
    decoded = decode_request(RawRecord(Position("t", 0, 0), key, value, list(headers), 0, 0.0), PREPARE, 1 << 20)
    return decoded.id if isinstance(decoded, Request) else decoded.request_id


sendable = records.filter(lambda r: r[0] is not None or r[1] is not None)  # Kafka clients refuse neither


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(sendable, min_size=1, max_size=40))
def test_each_generated_record_ends_as_one_reply_dead_letter_or_counted_duplicate(fleet, batch):
    placed = [fleet.send(value, key, headers, n % PARTITIONS) for n, (value, key, headers) in enumerate(batch)]
    for (value, key, headers), place in zip(batch, placed, strict=True):
        fleet.sent[place] = reads_as(value, key, headers)
    markers = {fleet.send(f'{{"id":"m-{uuid.uuid4().hex}","inputs":[0.1]}}'.encode(), None, [], p)
               for p in range(PARTITIONS)}
    wait_until(lambda: markers <= fleet.outputs().keys() or fleet.worker.process.poll() is not None, 60,
               "the markers' replies")
    assert fleet.worker.process.poll() is None, fleet.worker.log()
    outputs = fleet.outputs()
    answered_ids = {fleet.sent[place] for place in outputs if place in fleet.sent}
    for place in placed:
        got = outputs.get(place, [])
        assert len(got) <= 1, f"{place}: {len(got)} outputs"
        if not got:  # a duplicate: the same id was answered from another record
            assert fleet.sent[place] is not None and fleet.sent[place] in answered_ids, (place, fleet.sent[place])
