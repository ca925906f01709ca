"""The producer side's transport seam without a broker: the client is chosen by name (and refused when
unknown), the confluent-kafka side's properties carry the security settings, kafka-python's partitioner
and the isolation level, which librdkafka itself accepts, and with no broker at all every blocking call
ends at its timeout."""

from __future__ import annotations

import socket
import time
from functools import partial

import pytest

import producer.transport_kafka_python as kafka_python_transport
from producer.transport import PublishTimeout, open_publisher, open_reply_reader
from worker.core.errors import ConfigError
from worker.core.security import PLAINTEXT, KafkaSecurity, Secret

NOWHERE = "127.0.0.1:9"  # nothing listens there: clients are built, never connected
PASSWORD = "s3cret-Kafka-pw"
SCRAM = KafkaSecurity(protocol="SASL_PLAINTEXT", sasl_mechanism="SCRAM-SHA-512", sasl_username="alice",
                      sasl_password=Secret(PASSWORD))


@pytest.mark.parametrize("open_transport", [open_publisher, open_reply_reader])
def test_an_unknown_client_is_refused_with_the_names_that_work(open_transport):
    with pytest.raises(ConfigError, match="kafka_client must be kafka-python or confluent, got 'librdkafka'"):
        open_transport("librdkafka", NOWHERE, PLAINTEXT)


def test_the_confluent_publisher_partitions_as_kafka_python_and_reaches_a_secured_cluster():
    confluent_kafka = pytest.importorskip("confluent_kafka")
    from producer.transport_confluent import publisher_config

    config = publisher_config(NOWHERE, SCRAM, linger_ms=5, batch_bytes=256 * 1024)
    assert config["partitioner"] == "murmur2_random"  # librdkafka's default, CRC32, puts keys elsewhere
    assert (config["acks"], config["enable.idempotence"], config["allow.auto.create.topics"]) == ("all", True, False)
    assert (config["linger.ms"], config["batch.size"]) == (5, 256 * 1024)
    assert (config["security.protocol"], config["sasl.mechanisms"], config["sasl.username"],
            config["sasl.password"]) == ("SASL_PLAINTEXT", "SCRAM-SHA-512", "alice", PASSWORD)
    assert "batch.size" not in publisher_config(NOWHERE, PLAINTEXT, linger_ms=5, batch_bytes=None)
    confluent_kafka.Producer(config)  # raises KafkaException for a property or value it does not know


def test_the_confluent_reader_reads_committed_on_request_and_never_shares_a_group():
    confluent_kafka = pytest.importorskip("confluent_kafka")
    from producer.transport_confluent import reader_config

    committed, uncommitted = reader_config(NOWHERE, SCRAM, True), reader_config(NOWHERE, SCRAM, False)
    assert (committed["isolation.level"], uncommitted["isolation.level"]) == ("read_committed", "read_uncommitted")
    assert committed["group.id"] != uncommitted["group.id"]
    assert (committed["enable.auto.commit"], committed["sasl.password"]) == (False, PASSWORD)
    consumer = confluent_kafka.Consumer(committed)
    consumer.close()


def closed_port() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{sock.getsockname()[1]}"


def test_kafka_python_waits_for_metadata_no_longer_than_the_time_given(monkeypatch):
    """A producer built while its broker was up and without the topic's metadata: kafka-python blocked 60 s
    (max_block_ms) in send. Building it without a broker needs its version probe skipped."""
    monkeypatch.setattr(kafka_python_transport, "KafkaProducer",
                        partial(kafka_python_transport.KafkaProducer, api_version=(4, 0)))
    nowhere = closed_port()
    publisher = open_publisher("kafka-python", nowhere, PLAINTEXT)
    done = []
    started = time.monotonic()
    with pytest.raises(PublishTimeout, match=f"no metadata for topic 'requests' within 1 s from the brokers at "
                                             f"{nowhere}"):
        publisher.publish("requests", b"k", b"v", lambda *outcome: done.append(outcome), timeout_s=1.0)
    assert 1.0 <= time.monotonic() - started < 1.5
    started = time.monotonic()
    with pytest.raises(PublishTimeout):
        publisher.publish("requests", b"k", b"v", lambda *outcome: done.append(outcome), timeout_s=0)
    with pytest.raises(PublishTimeout, match="within 0.3 s"):
        publisher.prepare("requests", timeout_s=0.3)
    assert time.monotonic() - started < 1.0
    assert publisher.close() == 0 and done == []  # nothing was queued, nothing is reported


def test_confluent_close_gives_up_on_what_no_broker_took_after_its_timeout_and_says_how_many():
    pytest.importorskip("confluent_kafka")
    publisher = open_publisher("confluent", closed_port(), PLAINTEXT)
    outcomes = []
    for i in range(5):
        publisher.publish("requests", f"k{i}".encode(), b"v", lambda *outcome: outcomes.append(outcome))
    assert publisher.flush(timeout_s=0.2) == 5
    started = time.monotonic()
    assert publisher.close(timeout_s=0.5) == 5
    assert time.monotonic() - started < 1.0
    assert len(outcomes) == 5 and all(partition is None and "PURGE" in str(error) for partition, error in outcomes)
