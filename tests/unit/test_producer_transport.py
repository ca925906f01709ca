"""The producer side's transport seam without a broker: the client is chosen by name (and refused when
unknown), and the confluent-kafka side's properties carry the security settings, kafka-python's partitioner
and the isolation level, which librdkafka itself accepts."""

from __future__ import annotations

import pytest

from producer.transport import open_publisher, open_reply_reader
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
