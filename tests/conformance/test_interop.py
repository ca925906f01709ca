"""streamscore with clients it did not write: requests from the Apache Kafka Java producer and from librdkafka in
every codec, replies read by the Java consumer, upstream transactions, a batch a client cannot decode, and the
client properties users pass by their Java names.

Each test runs a real worker process on a real broker (``broker``: the session's, or a version of the matrix).
"""

from __future__ import annotations

import os
import socket
import struct
import urllib.request
import uuid
from pathlib import Path

import orjson
import pytest
from kafka import KafkaConsumer, TopicPartition

from producer.topics import create_topics
from tests.conformance import java_client
from tests.integration.kit import REPO, Landed, Producer, TopicReader, Topics, start_worker, wait_until
from worker.core.security import PLAINTEXT
from worker.kafka.kafka_python.connection import client_config

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
NULL_KEYS = ("gzip", "zstd")  # these codecs' requests carry their id in the value only
ANSWER_S = 180.0  # a worker start (torch's import) plus every request of the test, on two shared cores
CODEC_OF_ID = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}


def _topic(broker: str, name: str, partitions: int) -> str:
    create_topics(broker, {name: partitions})
    return name


def _own_topics(broker: str, requests: str) -> Topics:
    """A reply and a dead-letter topic of a test's own, beside a requests topic that tests share."""
    base = f"cf-{uuid.uuid4().hex[:10]}"
    create_topics(broker, {f"{base}.replies": 3, f"{base}.dlq": 1})
    return Topics(requests, f"{base}.replies", f"{base}.dlq")


def _worker(broker, redis_url, topics, tmp_path, client, *extra, entry=("-m", "worker"), name="worker"):
    group = f"{topics.replies}.group"  # its own group and dedup namespace, though the requests are shared
    return start_worker(broker, redis_url, topics, tmp_path, "--kafka-client", client, "--group", group,
                        "--dedup-namespace", group, *extra, entry=entry, name=name)


def _librdkafka_requests(broker: str, topic: str, per_codec: int) -> dict[str, str | None]:
    """Requests written by librdkafka's producer in each codec, with a traceparent and a header of no meaning
    to the worker; every other one has no key. Their ids and traceparents."""
    from confluent_kafka import Producer as LibrdkafkaProducer

    written: dict[str, str | None] = {}
    for codec in CODECS:
        producer = LibrdkafkaProducer({"bootstrap.servers": broker, "compression.type": codec, "linger.ms": 5,
                                       "enable.idempotence": True})
        for n in range(per_codec):
            request_id = f"rdk-{codec}-{n}"
            traceparent = f"00-{uuid.uuid4().hex}-{uuid.uuid4().hex[:16]}-01"
            producer.produce(topic, orjson.dumps({"id": request_id, "inputs": [n % 7 / 10] * 16}),
                             key=None if n % 2 else request_id.encode(),
                             headers=[("x-origin", b"librdkafka"), ("traceparent", traceparent.encode())])
            written[request_id] = traceparent
        assert producer.flush(30) == 0, f"librdkafka could not write its {codec} requests"
    return written


@pytest.fixture(scope="module")
def outside_requests(broker, per_codec) -> tuple[str, dict[str, str | None]]:
    """One requests topic holding batches of every codec from two producers the project did not write: the
    Java client (idempotent, acks=all) and librdkafka. Its name, and each request's id and traceparent."""
    topic = _topic(broker, f"cf-{uuid.uuid4().hex[:10]}.requests", 3)
    written: dict[str, str | None] = {}
    for codec in CODECS:
        for record in java_client.produce(broker, topic, per_codec, f"java-{codec}", codec, traceparent=True,
                                          null_keys=codec in NULL_KEYS):
            written[record["id"]] = record["traceparent"]
    written.update(_librdkafka_requests(broker, topic, per_codec))
    return topic, written


def _answered(replies: Landed) -> set[str]:
    return {orjson.loads(r.value)["id"] for r in replies.records}


@pytest.mark.parametrize("delivery", ["at-least-once", "exactly-once"])
def test_outside_requests_in_every_codec_are_answered_once_and_read_by_the_java_consumer(
        broker, redis_url, outside_requests, kafka_client, delivery, tmp_path):
    _answer_outside_requests(broker, redis_url, outside_requests, kafka_client, delivery, tmp_path)


def test_outside_requests_are_answered_in_a_group_of_the_consumer_protocol_where_the_broker_runs_it(
        broker, redis_url, outside_requests, tmp_path):
    """KIP-848: the broker assigns the partitions (librdkafka only). A broker that does not run the protocol (3.9
    as it comes) is refused at start, exit 2, rather than joined and waited on without an error."""
    from worker.kafka.broker_facts import GROUP_PROTOCOLS_CONFIG
    from worker.kafka.kafka_python.broker_facts import KafkaPythonAdmin

    admin = KafkaPythonAdmin(broker, PLAINTEXT)
    try:
        runs = "consumer" in admin.broker_configs([GROUP_PROTOCOLS_CONFIG])[GROUP_PROTOCOLS_CONFIG]
    except LookupError:
        runs = False
    finally:
        admin.close()
    if runs:
        _answer_outside_requests(broker, redis_url, outside_requests, "confluent", "at-least-once", tmp_path,
                                 "--kafka-group-protocol", "consumer")
        return
    topics = _own_topics(broker, outside_requests[0])
    worker = _worker(broker, redis_url, topics, tmp_path, "confluent", "--kafka-group-protocol", "consumer")
    assert worker.process.wait(timeout=60) == 2
    assert "the broker runs the group protocols classic only" in worker.log()


def _answer_outside_requests(broker, redis_url, outside_requests, kafka_client, delivery, tmp_path, *extra):
    requests_topic, written = outside_requests
    topics = _own_topics(broker, requests_topic)
    worker = _worker(broker, redis_url, topics, tmp_path, kafka_client, "--delivery", delivery, *extra)
    reader = TopicReader(broker, topics.replies, read_committed=delivery == "exactly-once")
    reader.read_until(lambda landed: _answered(landed) >= set(written), ANSWER_S,
                      f"{len(written)} replies to outside requests", watch=worker)

    isolation = "read_committed" if delivery == "exactly-once" else "read_uncommitted"
    seen = java_client.consume(broker, topics.replies, len(written), 60, isolation)
    keys = [record["key"] for record in seen]
    assert sorted(keys) == sorted(written), "the Java consumer reads each reply once, keyed by its request id"
    for record in seen:
        reply = orjson.loads(record["value"])
        assert (reply["id"], reply["status"]) == (record["key"], "ok"), reply
        assert record["headers"].get("traceparent") == written[record["key"]], record
        assert "x-origin" not in record["headers"], "a request's unrelated header is not copied to its reply"
    dead_letters = TopicReader(broker, topics.dlq)
    assert dead_letters.read(timeout_s=1).records == []
    dead_letters.close()
    reader.close()
    worker.stop()


@pytest.mark.parametrize("kafka_client, isolation", [
    ("kafka-python", "read_committed"), ("confluent", "read_committed"), ("kafka-python", "read_uncommitted")])
def test_requests_of_aborted_upstream_transactions_are_answered_only_when_reading_uncommitted(
        broker, redis_url, kafka_client, isolation, tmp_path):
    requests_topic = _topic(broker, f"cf-{uuid.uuid4().hex[:10]}.requests", 1)
    produced = java_client.produce(broker, requests_topic, 60, "txn", "lz4", transactional_id=f"{requests_topic}.tx",
                                   abort_every=2)
    # Read in order after the transactions: once its reply is in, every record before it has been consumed.
    java_client.produce(broker, requests_topic, 1, "last", "none")
    committed = {r["id"] for r in produced if r["committed"]}
    aborted = {r["id"] for r in produced if not r["committed"]}
    assert len(committed) == len(aborted) == 30

    topics = _own_topics(broker, requests_topic)
    extra = () if isolation == "read_committed" else ("--consumer-property", "isolation.level=read_uncommitted")
    worker = _worker(broker, redis_url, topics, tmp_path, kafka_client, *extra)
    reader = TopicReader(broker, topics.replies)
    # The replies of one poll's worth of requests spread over the reply topic's three partitions, which a reader's
    # poll may bring back one at a time: read until every committed request's reply and the last one are in.
    landed = reader.read_until(lambda landed: committed | {"last-0"} <= _answered(landed), ANSWER_S,
                               "the reply of every committed request and of the last one", watch=worker)
    answered = _answered(reader.read(timeout_s=1))  # and a second more, for a reply that should not come
    if isolation == "read_committed":
        assert not answered & aborted, "a request of an aborted transaction was answered"
    else:
        assert aborted <= answered, "read_uncommitted answers the aborted transactions' requests too"
    assert len(landed.records) == len(answered)
    reader.close()
    worker.stop()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _committed(broker: str, group: str, topic: str, partition: int) -> int | None:
    consumer = KafkaConsumer(**client_config(broker), group_id=group, enable_auto_commit=False)
    try:
        return consumer.committed(TopicPartition(topic, partition))
    finally:
        consumer.close()


def test_a_batch_the_client_cannot_decode_stops_its_partition_only_until_a_worker_that_can_reads_it(
        broker, redis_url, tmp_path):
    requests_topic = _topic(broker, f"cf-{uuid.uuid4().hex[:10]}.requests", 2)
    for prefix, codec, partition in (("a", "gzip", 0), ("b", "gzip", 1), ("c", "snappy", 0), ("d", "lz4", 1),
                                     ("e", "gzip", 0)):
        java_client.produce(broker, requests_topic, 10, prefix, codec, partition=partition)
    ids = {prefix: {f"{prefix}-{n}" for n in range(10)} for prefix in "abcde"}
    topics = _own_topics(broker, requests_topic)
    port = _free_port()
    blind = _worker(broker, redis_url, topics, tmp_path, "kafka-python", "--http-port", str(port),
                    entry=("-m", "tests.conformance.without_codec", "snappy"))
    reader = TopicReader(broker, topics.replies)
    reader.read_until(lambda landed: _answered(landed) >= ids["a"] | ids["b"] | ids["d"], ANSWER_S,
                      "the replies of every decodable batch before the snappy one", watch=blind)

    def stopped() -> bool:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as page:
            return (f'streamscore_undecodable_partitions{{codec="snappy",partition="0",topic="{requests_topic}"}} 1.0'
                    in page.read().decode())

    wait_until(stopped, 30, "the metric of the stopped partition")
    events = [e for e in blind.events() if e.get("event") == "partition_undecodable"]
    assert [(e["partition"], e["offset"], e["codec"]) for e in events] == [(0, 10, "snappy")]
    assert "kafka-python[lz4,snappy,zstd]" in events[0]["fix"]
    assert not _answered(reader.read(timeout_s=2)) & (ids["c"] | ids["e"]), "nothing past the batch is answered"
    assert blind.process.poll() is None, "the worker goes on"
    blind.stop()
    group = f"{topics.replies}.group"
    assert _committed(broker, group, requests_topic, 0) == 10, "nothing past the batch is committed"

    seeing = _worker(broker, redis_url, topics, tmp_path, "kafka-python", name="seeing")
    everything = set().union(*ids.values())
    landed = reader.read_until(lambda landed: _answered(landed) >= everything, ANSWER_S,
                               "the replies of the snappy batch and what followed it", watch=seeing)
    assert len(landed.records) == len(everything), "each request answered once"
    reader.close()
    seeing.stop()


def _partition_logs(topic: str) -> list[Path]:
    """The broker's log segments of ``topic``, where the broker keeps them on this machine (deploy/local)."""
    state = Path(os.environ.get("STREAMSCORE_STATE_DIR") or REPO / ".local-services")
    return sorted(path for folder in state.glob(f"**/{topic}-[0-9]*") for path in folder.glob("*.log"))


def _batch_codecs(segment: Path) -> list[str]:
    """The codec of each record batch (message format v2) of a log segment, control batches left out."""
    data, at, codecs = segment.read_bytes(), 0, []
    while at + 23 <= len(data):
        (length,) = struct.unpack_from(">i", data, at + 8)
        (attributes,) = struct.unpack_from(">h", data, at + 21)
        if data[at + 16] == 2 and not attributes & 0x20:
            codecs.append(CODEC_OF_ID[attributes & 0x07])
        at += 12 + length
    return codecs


@pytest.mark.parametrize("kafka_client, codec, setting", [
    ("kafka-python", "zstd", ("--producer-property", "compression.type=zstd")),
    ("confluent", "lz4", ("--reply-compression", "lz4")),
])
def test_the_reply_codec_and_batch_size_show_in_what_lands(broker, redis_url, kafka_client, codec, setting,
                                                           tmp_path):
    """Read back from the broker's log segments: each reply batch in the codec asked for, and, with batch.size
    below one reply's size, one reply a batch."""
    topics = Topics.create(broker, partitions=2)
    producer = Producer(broker)
    producer.send_requests(topics.requests, "z", [[0.5] * 16] * 40)
    producer.close()
    worker = start_worker(broker, redis_url, topics, tmp_path, "--kafka-client", kafka_client, *setting,
                          "--producer-property", "linger.ms=20", "--producer-property", "batch.size=100",
                          "--consumer-property", "fetch.max.bytes=2000000")
    reader = TopicReader(broker, topics.replies)
    reader.read_until(lambda landed: len(_answered(landed)) == 40, ANSWER_S, "40 replies", watch=worker)
    reader.close()
    worker.stop()
    segments = _partition_logs(topics.replies)
    if not segments:
        pytest.skip(f"the broker at {broker} keeps its log elsewhere: the codec on disk cannot be read here")
    codecs = [c for segment in segments for c in _batch_codecs(segment)]
    assert set(codecs) == {codec} and len(codecs) == 40, codecs


@pytest.mark.parametrize("argument, says", [
    (("--consumer-property", "enable.auto.commit=true"), "enable.auto.commit: the worker sets this property itself"),
    (("--producer-property", "transactional.id=mine"), "transactional.id: the worker sets this property itself; "
                                                       "set --transactional-id"),
    (("--consumer-property", "fetch.maxbytes=1"), "fetch.maxbytes: not a property the worker passes on"),
    (("--producer-property", "socket.connection.setup.timeout.ms=5000"), "kafka-python has no equivalent"),
])
def test_a_refused_property_stops_the_worker_at_start_with_exit_2(broker, redis_url, argument, says, tmp_path):
    topics = Topics.create(broker, partitions=1)
    worker = start_worker(broker, redis_url, topics, tmp_path, *argument)
    assert worker.process.wait(timeout=60) == 2
    assert says in worker.log()


def test_a_property_the_client_refuses_stops_the_worker_at_start_naming_it(broker, redis_url, tmp_path):
    topics = Topics.create(broker, partitions=1)
    worker = start_worker(broker, redis_url, topics, tmp_path, "--kafka-client", "confluent",
                          "--consumer-property", "fetch.max.bytes=1000")
    assert worker.process.wait(timeout=60) == 2
    assert "the confluent client refused its configuration" in worker.log()
    assert "fetch.max.bytes" in worker.log()


@pytest.mark.parametrize("kafka_client", ["kafka-python", "confluent"])
def test_the_producer_cli_passes_its_producer_properties(broker, kafka_client):
    import subprocess
    import sys

    topic = _topic(broker, f"cf-{uuid.uuid4().hex[:10]}.requests", 1)
    sent = subprocess.run([sys.executable, "-m", "producer", "--bootstrap-servers", broker, "send", topic,
                           "--synthetic", "churn", "--count", "50", "--no-progress", "--kafka-client", kafka_client,
                           "--producer-property", "compression.type=snappy"],
                          cwd=REPO, capture_output=True, text=True, timeout=120)
    assert sent.returncode == 0, sent.stderr
    segments = _partition_logs(topic)
    if not segments:
        pytest.skip(f"the broker at {broker} keeps its log elsewhere: the codec on disk cannot be read here")
    assert {c for segment in segments for c in _batch_codecs(segment)} == {"snappy"}


def _batch_sizes(replies: Landed) -> list[int]:
    return [int(dict(r.headers)["batch-size"]) for r in replies.records]


@pytest.mark.parametrize("fetch_max_bytes, most", [(None, 64), ("1", 4)])
def test_fetch_max_bytes_shows_in_the_batches_the_worker_can_make(broker, redis_url, fetch_max_bytes, most, tmp_path):
    """A fetch of at most one byte still returns one record batch (the broker's rule), so with each request a
    batch of its own the worker sees one or two requests a poll; without the property, all of them at once."""
    topics = Topics.create(broker, partitions=1)
    producer = Producer(broker)
    for n in range(100):
        producer.send(topics.requests, {"id": f"f{n}", "inputs": [0.5] * 16}, key=f"f{n}".encode())
        producer.flush()  # a batch each
    producer.close()
    extra = () if fetch_max_bytes is None else ("--consumer-property", f"fetch.max.bytes={fetch_max_bytes}")
    worker = start_worker(broker, redis_url, topics, tmp_path, "--max-batch-size", "64", *extra)
    reader = TopicReader(broker, topics.replies)
    landed = reader.read_until(lambda landed: len(_answered(landed)) == 100, ANSWER_S, "100 replies", watch=worker)
    reader.close()
    worker.stop()
    if fetch_max_bytes is None:
        assert max(_batch_sizes(landed)) == most, "all 100 were there at the first poll: batches of 64"
    else:
        assert max(_batch_sizes(landed)) <= most, sorted(_batch_sizes(landed))


@pytest.mark.parametrize("kafka_client", ["kafka-python", "confluent"])
def test_linger_ms_holds_a_lone_request_of_the_producer_side(broker, kafka_client):
    """The producer side sends each request as it comes (ScoringClient: linger.ms 5); linger.ms=1500 passed as a
    property holds a lone one that long before the broker has it. (The worker flushes each step's replies when it
    settles them, so there linger.ms shapes batches within a step only.)"""
    import threading
    import time

    from producer.transport import open_publisher
    from worker.core.kafka_properties import KafkaProperties

    topic = _topic(broker, f"cf-{uuid.uuid4().hex[:10]}.requests", 1)
    publisher = open_publisher(kafka_client, broker, PLAINTEXT,
                               properties=KafkaProperties(producer=(("linger.ms", "1500"),)))
    publisher.prepare(topic, 30)
    answered = threading.Event()
    started = time.monotonic()
    publisher.publish(topic, b"k", b"{}", lambda _partition, _error: answered.set())
    while not answered.is_set() and time.monotonic() - started < 30:
        publisher.serve()
        time.sleep(0.01)
    held = time.monotonic() - started
    publisher.close()
    assert answered.is_set() and held >= 1.4, f"acknowledged after {held:.2f} s"
