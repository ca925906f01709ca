"""Registry-framed requests on real Kafka and a real schema registry (docs/formats.md).

The request schema is registered in the local registry by the producer side
(``send_requests`` with ``request_encoder``, and ``ScoringClient``), or by
Confluent's own serializers, as an event producer would; hostile records go in
beside the framed ones; a real worker on each Kafka client reads them. Every
record must end as exactly one reply or one dead letter, each dead letter with
its reason and, where the frame named one, its schema id. A schema evolved
while the worker runs is read without a restart, and a registry outage holds
the records it would decode until the registry is back, losing none.
"""

from __future__ import annotations

import time

import orjson
import pytest

from producer.client import ScoringClient
from producer.send import send_requests, synthetic_requests
from producer.topics import create_topics
from tests.integration.confluent_serializers import deserializer, serializer
from tests.integration.kit import Producer, TopicReader, Topics, start_worker
from tests.integration.registry_gate import RegistryGate
from worker.core.formats import Formats
from worker.core.framing import frame, read_frame
from worker.core.wire import H_DLQ_CODE, H_DLQ_SCHEMA_ID
from worker.formats.registry_client import RegistryClient
from worker.formats.requests import DEFAULT_SCHEMAS, request_encoder
from worker.formats.subjects import subject

VALID = 12
UNKNOWN_ID = 987_654


@pytest.mark.parametrize(("kafka_client", "request_format"), [("kafka-python", "avro"),
                                                              ("confluent", "json-schema"),
                                                              ("kafka-python", "protobuf")])
def test_framed_requests_are_answered_and_hostile_ones_dead_lettered(bootstrap, redis_url, schema_registry,
                                                                    tmp_path, kafka_client, request_format):
    if kafka_client == "confluent":
        pytest.importorskip("confluent_kafka")
    topics = Topics.create(bootstrap, partitions=2)
    formats = Formats(request_format=request_format, registry_url=schema_registry)
    encode = request_encoder(formats, topics.requests)
    schema_id = RegistryClient(schema_registry).lookup(subject("topic", topics.requests, ""),
                                                       _schema_type(request_format), DEFAULT_SCHEMAS[request_format])
    summary = send_requests(bootstrap, topics.requests, synthetic_requests("churn", VALID), progress=False,
                            encode=encode, kafka_client=kafka_client)
    assert summary.sent == VALID

    hostile = Producer(bootstrap)
    wrong_payload = b"{not json" if request_format == "json-schema" else b"\x00\xff\xff\xff\xff"
    hostile.send(topics.requests, b'{"id": "plain-json", "inputs": []}', key=b"plain-json")  # no magic byte
    hostile.send(topics.requests, b"\x00\x01", key=b"too-short")
    hostile.send(topics.requests, frame(UNKNOWN_ID, b"\x00"), key=b"unknown-id")
    hostile.send(topics.requests, frame(schema_id, wrong_payload), key=b"wrong-payload")
    hostile.send(topics.requests, encode([0.5, 0.5], "short-inputs", None, None), key=b"short-inputs")
    hostile.flush()
    hostile.close()

    worker = start_worker(bootstrap, redis_url, topics, tmp_path, "--kafka-client", kafka_client,
                          "--request-format", request_format, "--schema-registry-url", schema_registry,
                          env={"SCHEMA_REGISTRY_UNKNOWN_ID_RETRIES": "1"})
    replies, dead = TopicReader(bootstrap, topics.replies), TopicReader(bootstrap, topics.dlq)
    try:
        with ScoringClient(bootstrap, topics.requests, topics.replies, formats=formats,
                           kafka_client=kafka_client, timeout_s=60) as client:
            answer = client.score([0.1] * 16)  # the client's own round trip, beside the bulk sends
        assert answer["status"] == "ok", answer
        landed = replies.read_until(lambda got: len(got.records) >= VALID + 2, 60, "the replies", watch=worker)
        dead_letters = dead.read_until(lambda got: len(got.records) >= 4, 30, "the dead letters", watch=worker)
        worker.stop()
        replies.read(1.0)
        dead.read(0.5)
    finally:
        replies.close()
        dead.close()

    by_id = landed.by_id()
    assert all(len(answers) == 1 for answers in by_id.values()), by_id
    assert len(landed.records) == VALID + 2
    statuses = {request_id: answers[0]["status"] for request_id, answers in by_id.items()}
    assert statuses.pop("short-inputs") == "error"
    assert by_id["short-inputs"][0]["error"]["code"] == "wrong_input_length"
    assert set(statuses.values()) == {"ok"}

    codes = {}
    for record in dead_letters.records:
        headers = dict(record.headers)
        codes[record.key] = (headers[H_DLQ_CODE].decode(), headers.get(H_DLQ_SCHEMA_ID))
    assert len(dead_letters.records) == 4
    assert codes == {b"plain-json": ("not_framed", None), b"too-short": ("not_framed", None),
                     b"unknown-id": ("unknown_schema", str(UNKNOWN_ID).encode()),
                     b"wrong-payload": ("invalid_payload", str(schema_id).encode())}


@pytest.mark.parametrize(("kafka_client", "request_format"), [("confluent", "avro"), ("kafka-python", "protobuf"),
                                                              ("confluent", "json-schema")])
def test_records_from_confluent_serializers_are_answered(bootstrap, redis_url, schema_registry, tmp_path,
                                                        kafka_client, request_format):
    """Written by Confluent's serializers (a Protobuf one from a class protoc generated), read with no class."""
    if kafka_client == "confluent":
        pytest.importorskip("confluent_kafka")
    topics = Topics.create(bootstrap, partitions=2)
    serialize = serializer(request_format, schema_registry, DEFAULT_SCHEMAS[request_format], tmp_path)
    _send(bootstrap, topics.requests, [serialize(_body(f"c{n}", n), topics.requests) for n in range(VALID)])

    worker = start_worker(bootstrap, redis_url, topics, tmp_path, "--kafka-client", kafka_client,
                          "--request-format", request_format, "--schema-registry-url", schema_registry)
    replies = TopicReader(bootstrap, topics.replies)
    try:
        landed = replies.read_until(lambda got: len(got.records) >= VALID, 60, "the replies", watch=worker)
        worker.stop()
    finally:
        replies.close()
    assert sorted(landed.by_id()) == sorted(f"c{n}" for n in range(VALID))
    assert {reply["status"] for reply in landed.values()} == {"ok"}, landed.values()


EVOLVED_AVRO = orjson.loads(DEFAULT_SCHEMAS["avro"])
EVOLVED_AVRO["fields"].append({"name": "source", "type": ["null", "string"], "default": None})


def test_an_evolved_schema_is_read_without_a_restart(bootstrap, redis_url, schema_registry, tmp_path):
    """Version 2 of the subject (a new optional field) is registered while the worker runs: its records are
    answered by the same worker, which fetches the new id when it first meets it."""
    pytest.importorskip("confluent_kafka")
    topics = Topics.create(bootstrap, partitions=2)
    first = serializer("avro", schema_registry, DEFAULT_SCHEMAS["avro"], tmp_path)
    worker = start_worker(bootstrap, redis_url, topics, tmp_path, "--kafka-client", "confluent",
                          "--request-format", "avro", "--schema-registry-url", schema_registry)
    replies = TopicReader(bootstrap, topics.replies)
    try:
        v1 = [first(_body(f"v1-{n}", n), topics.requests) for n in range(VALID)]
        _send(bootstrap, topics.requests, v1)
        replies.read_until(lambda got: len(got.records) >= VALID, 60, "the replies to version 1", watch=worker)

        second = serializer("avro", schema_registry, orjson.dumps(EVOLVED_AVRO).decode(), tmp_path)
        v2 = [second({**_body(f"v2-{n}", n), "source": "mobile"}, topics.requests) for n in range(VALID)]
        assert read_frame(v2[0]).schema_id != read_frame(v1[0]).schema_id
        _send(bootstrap, topics.requests, v2)
        landed = replies.read_until(lambda got: len(got.records) >= 2 * VALID, 60, "the replies to version 2",
                                    watch=worker)
        worker.stop()
    finally:
        replies.close()
    assert len(landed.by_id()) == 2 * VALID
    assert {reply["status"] for reply in landed.values()} == {"ok"}


def test_a_registry_outage_holds_records_until_it_is_back(bootstrap, redis_url, schema_registry, tmp_path):
    """The worker reaches the registry through a gate; closed, the records of a schema it has not fetched yet
    wait (none answered, none dead-lettered) while those of a cached schema fetched with them go on; opened,
    they are answered."""
    pytest.importorskip("confluent_kafka")
    topics = Topics.create(bootstrap, partitions=2)
    gate = RegistryGate(schema_registry)
    cached = serializer("avro", schema_registry, DEFAULT_SCHEMAS["avro"], tmp_path)
    worker = start_worker(bootstrap, redis_url, topics, tmp_path, "--request-format", "avro",
                          "--schema-registry-url", gate.url, "--schema-registry-timeout-ms", "500")
    replies, dead = TopicReader(bootstrap, topics.replies), TopicReader(bootstrap, topics.dlq)
    try:
        _send(bootstrap, topics.requests, [cached(_body(f"before-{n}", n), topics.requests) for n in range(VALID)])
        replies.read_until(lambda got: len(got.records) >= VALID, 60, "the replies before the outage", watch=worker)

        gate.close_gate()
        new = serializer("avro", schema_registry, orjson.dumps(EVOLVED_AVRO).decode(), tmp_path)  # past the gate
        # The cached schema's first: fetching stops once records wait, and these precede them in each partition.
        _send(bootstrap, topics.requests, [cached(_body(f"during-{n}", n), topics.requests) for n in range(VALID)])
        _send(bootstrap, topics.requests, [new(_body(f"held-{n}", n), topics.requests) for n in range(VALID)])
        during = replies.read_until(lambda got: len(got.records) >= 2 * VALID, 60, "the cached schema's replies",
                                    watch=worker)
        time.sleep(2.0)
        during = replies.read(0.5)
        assert not any(request_id.startswith("held-") for request_id in during.by_id()), "answered in the outage"
        assert dead.read(0.5).records == []
        assert gate.refused > 0

        gate.open_gate()
        landed = replies.read_until(lambda got: len(got.records) >= 3 * VALID, 60, "the held records' replies",
                                    watch=worker)
        worker.stop()
        assert dead.read(0.5).records == []
    finally:
        gate.stop()
        replies.close()
        dead.close()
    assert len(landed.by_id()) == 3 * VALID
    assert {reply["status"] for reply in landed.values()} == {"ok"}
    events = {event.get("event") for event in worker.events()}
    assert {"schema_registry_failed", "schema_registry_recovered"} <= events


@pytest.mark.parametrize(("kafka_client", "reply_format"), [("confluent", "avro"), ("kafka-python", "protobuf"),
                                                            ("kafka-python", "json-schema")])
def test_replies_in_a_registry_format_are_read_by_the_client_and_by_confluent(bootstrap, redis_url, schema_registry,
                                                                             tmp_path, kafka_client, reply_format):
    """The worker registers its reply schema (made from the churn model's outputs) under the record strategy's
    subject; ScoringClient reads the framed replies with no format named, and so do Confluent's deserializers,
    an error reply included."""
    if kafka_client == "confluent":
        pytest.importorskip("confluent_kafka")
    topics = Topics.create(bootstrap, partitions=2)
    worker = start_worker(bootstrap, redis_url, topics, tmp_path, "--kafka-client", kafka_client,
                          "--reply-format", reply_format, "--subject-strategy", "record",
                          "--schema-registry-url", schema_registry)
    replies = TopicReader(bootstrap, topics.replies)
    formats = Formats(registry_url=schema_registry)
    try:
        with ScoringClient(bootstrap, topics.requests, topics.replies, formats=formats, kafka_client=kafka_client,
                           timeout_s=60) as client:
            answer = client.score([0.25] * 16, request_id="framed-ok")
            refused = client.score([0.25] * 3, request_id="framed-error")
        landed = replies.read_until(lambda got: len(got.records) >= 2, 30, "the replies", watch=worker)
        worker.stop()
    finally:
        replies.close()
    assert answer["status"] == "ok" and set(answer["outputs"]) == {"churn_probability"}, answer
    assert (answer["model"], answer["id"]) == ("churn", "framed-ok")
    assert refused["status"] == "error" and refused["error"]["code"] == "wrong_input_length", refused
    assert "outputs" not in refused

    (schema_id,) = {read_frame(record.value).schema_id for record in landed.records}
    registry = RegistryClient(schema_registry)
    registered = registry.schema(schema_id)  # the registry's own word on what the worker registered
    assert registry.lookup("streamscore.ChurnReply", _schema_type(reply_format), registered.text) == schema_id
    read = deserializer(reply_format, schema_registry, registered.text, tmp_path)
    by_id = {record.key.decode(): read(record.value, topics.replies) for record in landed.records}
    assert by_id["framed-ok"]["status"] == "ok"
    assert abs(by_id["framed-ok"]["outputs"]["churn_probability"] - answer["outputs"]["churn_probability"]) < 1e-9
    assert by_id["framed-error"]["error"]["code"] == "wrong_input_length"


TWO_TOPICS = """
default_model = "churn"

[models.churn]
model = "churn"

[models.orders]
model = "churn"
topic = "ORDERS_TOPIC"
"""


def test_each_requests_topic_is_read_in_its_own_format(bootstrap, redis_url, schema_registry, tmp_path):
    """--request-format json,ORDERS=protobuf: the requests topic's JSON and the orders model's topic's Protobuf
    are answered by one worker; JSON sent to the orders topic is dead-lettered not_framed."""
    topics = Topics.create(bootstrap, partitions=2)
    orders = f"{topics.requests}.orders"
    create_topics(bootstrap, {orders: 2})
    config = tmp_path / "worker.toml"
    config.write_text(TWO_TOPICS.replace("ORDERS_TOPIC", orders))
    serialize = serializer("protobuf", schema_registry, DEFAULT_SCHEMAS["protobuf"], tmp_path)
    _send(bootstrap, orders, [serialize(_body(f"o{n}", n), orders) for n in range(VALID)])
    producer = Producer(bootstrap)
    producer.send_requests(topics.requests, "j", [[n / 100] * 16 for n in range(VALID)])
    producer.send(orders, {"id": "json-on-orders", "inputs": [0.5] * 16}, key=b"json-on-orders")
    producer.flush()
    producer.close()

    worker = start_worker(bootstrap, redis_url, topics, tmp_path, "--config", str(config),
                          "--request-format", f"json,{orders}=protobuf", "--schema-registry-url", schema_registry)
    replies, dead = TopicReader(bootstrap, topics.replies), TopicReader(bootstrap, topics.dlq)
    try:
        landed = replies.read_until(lambda got: len(got.records) >= 2 * VALID, 60, "the replies", watch=worker)
        dead_letters = dead.read_until(lambda got: len(got.records) >= 1, 30, "the dead letter", watch=worker)
        worker.stop()
    finally:
        replies.close()
        dead.close()
    models = {request_id: answers[0]["model"] for request_id, answers in landed.by_id().items()}
    assert models == {**{f"j{n}": "churn" for n in range(VALID)}, **{f"o{n}": "orders" for n in range(VALID)}}
    assert {reply["status"] for reply in landed.values()} == {"ok"}
    (letter,) = dead_letters.records
    assert (letter.key, dict(letter.headers)[H_DLQ_CODE]) == (b"json-on-orders", b"not_framed")


def _body(request_id: str, n: int) -> dict:
    return {"id": request_id, "inputs": [n / 100] * 16}


def _send(bootstrap: str, topic: str, values: list[bytes]) -> None:
    producer = Producer(bootstrap)
    for value in values:
        producer.send(topic, value)
    producer.flush()
    producer.close()


def _schema_type(request_format: str) -> str:
    return {"avro": "AVRO", "json-schema": "JSON", "protobuf": "PROTOBUF"}[request_format]



def test_a_backfill_scores_old_framed_requests_instead_of_expiring_them(bootstrap, redis_url, schema_registry,
                                                                        tmp_path):
    """A deadline long past is dropped by the job whatever the format: it lived in JSON bytes only before."""
    from tests.integration.test_backfill import backfill, events

    topics = Topics.create(bootstrap, partitions=2)
    serialize = serializer("avro", schema_registry, DEFAULT_SCHEMAS["avro"], tmp_path)
    _send(bootstrap, topics.requests, [serialize({**_body(f"old{n}", n), "deadline_ms": 1000}, topics.requests)
                                       for n in range(VALID)])
    job_replies = f"{topics.requests}.bf"
    create_topics(bootstrap, {job_replies: 1})
    process, log, _ = backfill(bootstrap, redis_url, tmp_path, topics.requests, job_replies, "--from-time", "0",
                               "--request-format", "avro", "--schema-registry-url", schema_registry,
                               "--dead-letter-topic", topics.dlq, "--dedup-namespace", topics.requests)
    assert process.wait(timeout=180) == 0, log.read_text()[-3000:]
    [finished] = events(log, "backfill_finished")
    assert finished["complete"] and finished["consumed"] == VALID
    replies = TopicReader(bootstrap, job_replies)
    try:
        landed = replies.read_until(lambda got: len(got.records) >= VALID, 60, "the job's replies")
    finally:
        replies.close()
    assert {reply["status"] for reply in landed.values()} == {"ok"}, landed.values()
