"""Sends a topic refuses for good, on real Kafka, both clients, both delivery modes: a reply_to topic
whose max.message.bytes is below the reply, and a compacted dead-letter topic with a small
max.message.bytes. Each refused send is replaced (worker/core/refusals.py), the worker goes on, and every
record ends as exactly one reply or dead letter."""

from __future__ import annotations

import orjson
import pytest
from kafka import KafkaProducer
from kafka.admin import KafkaAdminClient, NewTopic

from tests.integration.faulty_model import expected_score
from tests.integration.kit import TopicReader, start_worker, wait_until
from worker.core.wire import send_size

VALUES = [0.25] * 16
TOPIC_LIMIT = 20_000  # max.message.bytes of both refusing topics


def create_refusing_topics(bootstrap: str, base: str) -> tuple[str, str]:
    small, dlq = f"{base}.small-replies", f"{base}.compact-dlq"
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.create_topics([NewTopic(small, 1, 1, topic_configs={"max.message.bytes": str(TOPIC_LIMIT)}),
                             NewTopic(dlq, 1, 1, topic_configs={"max.message.bytes": str(TOPIC_LIMIT),
                                                                "cleanup.policy": "compact"})])
    finally:
        admin.close()
    probe = KafkaProducer(bootstrap_servers=bootstrap)
    try:
        wait_until(lambda: probe.partitions_for(small) and probe.partitions_for(dlq), 30, "the new topics")
    finally:
        probe.close()
    return small, dlq


@pytest.mark.parametrize("delivery", ["at-least-once", "exactly-once"])
def test_refused_replies_and_dead_letters_are_replaced_and_the_worker_goes_on(
        bootstrap, redis_url, topics, tmp_path, kafka_client, delivery):
    small, dlq = create_refusing_topics(bootstrap, topics.requests.removesuffix(".requests"))
    worker = start_worker(bootstrap, redis_url, topics, tmp_path, "--kafka-client", kafka_client,
                          "--delivery", delivery, "--model", "tests.integration.faulty_model:faulty",
                          "--dead-letter-topic", dlq, "--max-batch-size", "8", "--max-wait-ms", "5")
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=2)

    def request(request_id: str, **fields: object) -> None:
        producer.send(topics.requests, orjson.dumps({"id": request_id, "inputs": {"values": VALUES}, **fields}),
                      key=request_id.encode(), partition=0)

    for n in range(3):
        request(f"good-{n}")
        request(f"small-{n}", reply_to=small)
        request(f"big-{n}", reply_to=small, inputs={"values": VALUES, "pad": 2 * TOPIC_LIMIT})
        producer.send(topics.requests, b"\x00\xff" * TOPIC_LIMIT, partition=0)  # key-less, too large for the dlq
        producer.send(topics.requests, b"not json either", partition=0)  # key-less: the compacted dlq refuses it
    request("big-to-default", inputs={"values": VALUES, "pad": 2 * TOPIC_LIMIT})
    producer.flush()
    producer.close()

    committed = delivery == "exactly-once"
    to_default = TopicReader(bootstrap, topics.replies, read_committed=committed)
    to_small = TopicReader(bootstrap, small, read_committed=committed)
    letters = TopicReader(bootstrap, dlq, read_committed=committed)
    to_default.read_until(lambda got: len(got.by_id()) >= 4, 90, "the replies to the default topic", watch=worker)
    to_small.read_until(lambda got: len(got.by_id()) >= 6, 60, "the replies to the small topic", watch=worker)
    letters.read_until(lambda got: len(got.records) >= 6, 60, "the dead letters", watch=worker)
    assert worker.process.poll() is None, worker.log()
    assert worker.stop() == 0, worker.log()

    default_replies = to_default.read(1.0).by_id()
    small_replies = to_small.read(0.5).by_id()
    dead = letters.read(0.5).records
    assert sorted(default_replies) == ["big-to-default", "good-0", "good-1", "good-2"]
    assert len(default_replies["big-to-default"][0]["outputs"]["pad"]) == 2 * TOPIC_LIMIT
    assert sorted(small_replies) == sorted([f"small-{n}" for n in range(3)] + [f"big-{n}" for n in range(3)])
    assert all(len(answers) == 1 for answers in [*default_replies.values(), *small_replies.values()])
    score = expected_score(VALUES)
    for n in range(3):
        assert small_replies[f"small-{n}"][0]["outputs"]["score"] == pytest.approx(score, abs=1e-6)
        error = small_replies[f"big-{n}"][0]["error"]
        assert error["code"] == "reply_too_large" and "MESSAGE_TOO_LARGE" in error["message"]
    assert len(dead) == 6
    for letter in dead:  # each keyed by its source position, the large ones cut
        headers = dict(letter.headers)
        assert letter.key == f"{topics.requests}/0/{int(headers['source-offset'])}".encode()
        assert send_size(letter.key, letter.value, letter.headers) <= 4096
    assert sum("dlq-truncated" in dict(letter.headers) for letter in dead) == 3
    events = [e["event"] for e in worker.events()]
    assert "send_refused" in events and "worker_failed" not in events


@pytest.mark.parametrize("delivery", ["at-least-once", "exactly-once"])
def test_a_reply_to_topic_deleted_after_a_reply_went_there_is_not_created_again_and_nothing_stops(
        bootstrap, redis_url, topics, tmp_path, kafka_client, delivery):
    theirs = f"{topics.requests.removesuffix('.requests')}.theirs"
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    admin.create_topics([NewTopic(theirs, 1, 1)])
    worker = start_worker(bootstrap, redis_url, topics, tmp_path, "--kafka-client", kafka_client,
                          "--delivery", delivery, "--model", "tests.integration.faulty_model:faulty",
                          "--max-batch-size", "8", "--max-wait-ms", "5")
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=2)

    def request(request_id: str, **fields: object) -> None:
        producer.send(topics.requests, orjson.dumps({"id": request_id, "inputs": {"values": VALUES}, **fields}),
                      partition=0)
        producer.flush()

    committed = delivery == "exactly-once"
    request("first", reply_to=theirs)
    first = TopicReader(bootstrap, theirs, read_committed=committed)
    first.read_until(lambda got: len(got.records) == 1, 90, "the first reply on the reply_to topic", watch=worker)
    first.close()  # a reader of a deleted topic would ask for it to be created again
    admin.delete_topics([theirs])
    wait_until(lambda: theirs not in admin.list_topics(), 30, "the reply_to topic deleted")
    request("orphan", reply_to=theirs)  # the worker still knows the topic: the send goes there and fails
    for n in range(5):
        request(f"after-{n}")

    to_default = TopicReader(bootstrap, topics.replies, read_committed=committed)
    letters = TopicReader(bootstrap, topics.dlq, read_committed=committed)
    answered = {f"after-{n}" for n in range(5)}
    to_default.read_until(lambda got: answered <= set(got.by_id()), 90, "the replies after the orphan", watch=worker)
    # at-least-once: the reply goes to the dead letters; exactly-once: the aborted transaction's record is
    # checked again, and its reply_to is unknown now
    wait_until(lambda: "orphan" in to_default.read(0.2).by_id() or letters.read(0.2).records, 60,
               "the orphan's reply or dead letter")
    assert worker.process.poll() is None, worker.log()
    assert worker.stop() == 0, worker.log()
    replies, dead = to_default.read(0.5).by_id(), letters.read(0.5).records
    if committed:
        assert replies["orphan"][0]["error"]["code"] == "unknown_reply_topic" and not dead
    else:
        (letter,) = dead
        assert dict(letter.headers)["dlq-error-code"] == b"reply_refused"
        assert orjson.loads(letter.value)["id"] == "orphan" and "orphan" not in replies
    assert all(len(answers) == 1 for answers in replies.values())
    assert theirs not in admin.list_topics(), "a client created the deleted reply_to topic again"
    admin.close()
