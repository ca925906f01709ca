"""Registry-framed requests on real Kafka and a real schema registry (docs/formats.md).

The request schema is registered in the local registry by the producer side
(``send_requests`` with ``request_encoder``, and ``ScoringClient``); hostile
records go in beside the framed ones; a real worker on each Kafka client reads
them. Every record must end as exactly one reply or one dead letter, each dead
letter with its reason and, where the frame named one, its schema id.
"""

from __future__ import annotations

import pytest

from producer.client import ScoringClient
from producer.send import send_requests, synthetic_requests
from tests.integration.kit import Producer, TopicReader, Topics, start_worker
from worker.core.formats import Formats
from worker.core.framing import frame
from worker.core.wire import H_DLQ_CODE, H_DLQ_SCHEMA_ID
from worker.formats.registry_client import RegistryClient
from worker.formats.requests import DEFAULT_SCHEMAS, request_encoder, subject_of

VALID = 12
UNKNOWN_ID = 987_654


@pytest.mark.parametrize(("kafka_client", "request_format"), [("kafka-python", "avro"),
                                                              ("confluent", "json-schema")])
def test_framed_requests_are_answered_and_hostile_ones_dead_lettered(bootstrap, redis_url, schema_registry,
                                                                    tmp_path, kafka_client, request_format):
    if kafka_client == "confluent":
        pytest.importorskip("confluent_kafka")
    topics = Topics.create(bootstrap, partitions=2)
    formats = Formats(request_format=request_format, registry_url=schema_registry)
    encode = request_encoder(formats, topics.requests)
    schema_id = RegistryClient(schema_registry).lookup(subject_of(topics.requests), _schema_type(request_format),
                                                       DEFAULT_SCHEMAS[request_format])
    summary = send_requests(bootstrap, topics.requests, synthetic_requests("churn", VALID), progress=False,
                            encode=encode, kafka_client=kafka_client)
    assert summary.sent == VALID

    hostile = Producer(bootstrap)
    wrong_payload = b"\xff\xff\xff\xff" if request_format == "avro" else b"{not json"
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


def _schema_type(request_format: str) -> str:
    return "AVRO" if request_format == "avro" else "JSON"

