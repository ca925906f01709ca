"""The poison suite: hostile records and a user's model that raises, on real Kafka and Redis, on both
clients and in both delivery modes.

Every record sent ends as exactly one reply (keyed by its id) or one dead letter; the worker never
exits; the good requests around the poison are answered with the model's right score. The records:
near and above every size limit (the worker's --max-record-bytes, the worker's own MAX_SEND_BYTES for
what it sends, the broker's max.message.bytes), key-less and keyed, binary, huge and null-valued
headers, deeply nested JSON (past orjson's depth limit, and within it but past Python's recursion
limit), NaN and Infinity, wrong types at every level, and requests whose prepare, collate, forward or
split raise.
"""

from __future__ import annotations

import confluent_kafka
import orjson
import pytest
from kafka import KafkaProducer

from tests.integration.faulty_model import STAGES, expected_score
from tests.integration.kit import TopicReader, start_worker
from worker.core.wire import MAX_SEND_BYTES

MAX_RECORD_BYTES = 500_000  # the worker's limit in this suite, so that records above it still fit the broker
NEAR_BROKER_LIMIT = 1_040_000  # a value the broker still takes (max.message.bytes 1,048,588 by default)
VALUES = [0.25] * 16


def hostile_records() -> list[tuple[str, bytes | None, bytes | None, list[tuple[str, bytes | None]], str]]:
    """(name, key, value, headers, what it must become: 'ok', an error code, or 'dlq'). A header's value may be
    null, as the Java client sends it (kafka-python's producer sends bytes only: those go by confluent-kafka)."""
    good = orjson.dumps({"id": "x", "inputs": {"values": VALUES}})
    nested = b"[" * 5000 + b"]" * 5000
    deeper = b"[" * 1000 + b"]" * 1000  # JSON takes it (orjson: up to 1,024 levels); Python's repr of it does not
    return [
        ("keyless-near-broker-limit", None, b"\x00\xff" * (NEAR_BROKER_LIMIT // 2), [], "dlq"),
        ("keyed-near-broker-limit", b"keyed-near-broker-limit", b"z" * NEAR_BROKER_LIMIT, [], "record_too_large"),
        ("keyless-above-record-limit", None, b"y" * (MAX_RECORD_BYTES + 1), [], "dlq"),
        ("keyed-at-record-limit", b"keyed-at-record-limit",
         b'{"inputs":{"values":[' + b" " * (MAX_RECORD_BYTES - 100) + b"]}}", [], "model_error"),
        ("keyless-near-send-limit", None, b"w" * (MAX_SEND_BYTES - 200), [("h", b"v" * 300)], "dlq"),
        ("binary-headers", b"binary-headers", good.replace(b'"x"', b'"binary-headers"'),
         [("\u00e9t\u00e9", b"\xff\xfe\x00"), ("reply-to", b"\xff\xfe")], "invalid_reply_to"),
        ("huge-header", b"huge-header", good.replace(b'"x"', b'"huge-header"'), [("big", b"b" * 600_000)], "ok"),
        ("huge-traceparent", b"huge-traceparent", good.replace(b'"x"', b'"huge-traceparent"'),
         [("traceparent", b"0" * 400_000)], "ok"),
        ("deep-json", b"deep-json", b'{"id":"deep-json","inputs":' + nested + b"}", [], "invalid_json"),
        ("nan", b"nan", b'{"id":"nan","inputs":{"values":[NaN,Infinity]}}', [], "invalid_json"),
        ("overflow", b"overflow", b'{"id":"overflow","inputs":{"values":[1e999]}}', [], "invalid_json"),
        ("id-not-a-string", b"id-not-a-string", b'{"id":7,"inputs":{"values":[]}}', [], "invalid_id"),
        ("inputs-a-string", b"inputs-a-string", b'{"id":"inputs-a-string","inputs":"values"}', [], "model_error"),
        ("values-strings", b"values-strings", b'{"id":"values-strings","inputs":{"values":["a"]}}', [],
         "model_error"),
        ("deadline-a-string", b"deadline-a-string", b'{"id":"deadline-a-string","inputs":{},"deadline_ms":"x"}', [],
         "invalid_deadline"),
        ("reply-to-internal", b"reply-to-internal", good.replace(b'"x"', b'"reply-to-internal"')[:-1]
         + b',"reply_to":"__consumer_offsets"}', [], "invalid_reply_to"),
        ("reply-to-internal-header", b"reply-to-internal-header", good.replace(b'"x"', b'"reply-to-internal-header"'),
         [("reply-to", b"__transaction_state")], "invalid_reply_to"),
        ("reply-to-a-list", b"reply-to-a-list", b'{"id":"reply-to-a-list","inputs":{},"reply_to":["a"]}', [],
         "invalid_reply_to"),
        ("reply-to-nested", b"reply-to-nested", b'{"id":"reply-to-nested","inputs":{},"reply_to":' + deeper + b"}",
         [], "invalid_reply_to"),
        ("deadline-nested", b"deadline-nested", b'{"id":"deadline-nested","inputs":{},"deadline_ms":' + deeper + b"}",
         [], "invalid_deadline"),
        ("null-header-keyless", None, b"not json", [("x-null", None), ("origin", b"jvm")], "dlq"),
        ("array-body", b"array-body", b"[1,2,3]", [], "invalid_request"),
        ("tombstone", b"tombstone", None, [], "empty_value"),
        ("missing-values", b"missing-values", b'{"id":"missing-values","inputs":{"other":1}}', [], "model_error"),
        *[(f"fail-in-{stage}", f"fail-in-{stage}".encode(),
           orjson.dumps({"id": f"fail-in-{stage}", "inputs": {"values": VALUES, "fail_in": stage}}), [], "model_error")
          for stage in STAGES],
    ]


@pytest.mark.parametrize("delivery", ["at-least-once", "exactly-once"])
def test_every_hostile_record_ends_as_one_reply_or_dead_letter_and_the_worker_goes_on(
        bootstrap, redis_url, topics, tmp_path, kafka_client, delivery):
    worker = start_worker(bootstrap, redis_url, topics, tmp_path, "--kafka-client", kafka_client,
                          "--delivery", delivery, "--model", "tests.integration.faulty_model:faulty",
                          "--max-record-bytes", str(MAX_RECORD_BYTES), "--max-batch-size", "16", "--max-wait-ms", "5")
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", max_request_size=4 * 1024 * 1024, linger_ms=2)
    null_headers = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    hostile = hostile_records()
    good_ids = []
    for number, (_, key, value, headers, _) in enumerate(hostile):
        for n in range(3):  # good requests before, between and after every poison, on every partition
            good_id = f"good-{number}-{n}"
            good_ids.append(good_id)
            producer.send(topics.requests, orjson.dumps({"id": good_id, "inputs": {"values": VALUES}}),
                          key=good_id.encode())
        if all(text is not None for _, text in headers):
            producer.send(topics.requests, value, key=key, headers=headers, partition=number % 4)
        else:
            null_headers.produce(topics.requests, value, key, partition=number % 4, headers=headers)
    producer.flush()
    producer.close()
    assert null_headers.flush(30) == 0
    expect_replies = {name: want for name, _, _, _, want in hostile if want != "dlq"}
    expect_dead = sum(1 for *_, want in hostile if want == "dlq")

    replies = TopicReader(bootstrap, topics.replies, read_committed=delivery == "exactly-once")
    dead = TopicReader(bootstrap, topics.dlq)
    replies.read_until(lambda got: len(got.by_id()) >= len(good_ids) + len(expect_replies), 120,
                       "a reply for every good and every keyed hostile record", watch=worker)
    dead.read_until(lambda got: len(got.records) >= expect_dead, 30, "every dead letter", watch=worker)
    assert worker.process.poll() is None, worker.log()
    assert worker.stop() == 0
    by_id = replies.read(1.0).by_id()
    letters = dead.read(0.5).records

    assert sorted(by_id) == sorted(good_ids + list(expect_replies))
    assert all(len(answers) == 1 for answers in by_id.values()), {k: v for k, v in by_id.items() if len(v) > 1}
    score = expected_score(VALUES)
    assert all(by_id[i][0]["outputs"]["score"] == pytest.approx(score, abs=1e-6) for i in good_ids)
    got = {name: (by_id[name][0]["status"] if by_id[name][0]["status"] == "ok" else by_id[name][0]["error"]["code"])
           for name in expect_replies}
    assert got == expect_replies
    assert len(letters) == expect_dead
    for letter in letters:
        headers = dict(letter.headers)
        assert headers["dlq-error-code"] in (b"invalid_json", b"record_too_large", b"empty_value")
        assert len(letter.value or b"") <= MAX_SEND_BYTES
    jvm = [dict(letter.headers) for letter in letters if dict(letter.headers).get("origin") == b"jvm"]
    assert len(jvm) == 1 and jvm[0]["x-null"] == b""  # a null header value goes as an empty one
    # The two too large to send whole are cut (the one above the record limit alone fits, and goes whole).
    cut = [dict(letter.headers) for letter in letters if "dlq-truncated" in dict(letter.headers)]
    assert len(cut) == 2 and all(int(headers["dlq-original-bytes"]) > MAX_SEND_BYTES for headers in cut)
