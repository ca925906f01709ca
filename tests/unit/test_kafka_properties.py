"""Kafka client properties by Java name: the table, where they come from, what is refused, what each client gets."""

from __future__ import annotations

import argparse
import inspect
from pathlib import Path

import pytest
from kafka import KafkaConsumer, KafkaProducer

from worker.core.errors import ConfigError
from worker.core.kafka_properties import CODECS, OWNED, PROPERTIES, KafkaProperties, add_property_flags, table_rows
from worker.core.model_table import read_config_file
from worker.core.sections import Codec, KafkaSettings
from worker.core.settings import Settings
from worker.kafka.kafka_python.connection import producer_properties as kafka_python_producer
from worker.kafka.kafka_python.consumer import group_consumer_config

DOC = Path(__file__).resolve().parents[2] / "docs" / "interop.md"


def _parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_property_flags(parser)
    return parser.parse_args(list(argv))


def test_the_reply_codecs_are_one_list():
    assert inspect.get_annotations(KafkaSettings, eval_str=True)["reply_compression"] == Codec
    from typing import get_args
    assert get_args(Codec) == CODECS


def test_every_kafka_python_name_is_a_key_its_client_takes():
    consumer, producer = set(KafkaConsumer.DEFAULT_CONFIG), set(KafkaProducer.DEFAULT_CONFIG)
    for name, prop in PROPERTIES.items():
        if prop.kafka_python is None:
            continue
        for role in prop.roles:
            assert prop.kafka_python in (consumer if role == "consumer" else producer), (name, role)


def test_every_librdkafka_name_is_a_property_librdkafka_takes():
    confluent_kafka = pytest.importorskip("confluent_kafka")
    # In each property's range (librdkafka refuses a fetch.max.bytes below its message.max.bytes, 1000000).
    values = {"fetch.max.bytes": "2000000", "max.request.size": "2000000", "check.crcs": "true", "client.rack": "r1",
              "max.in.flight.requests.per.connection": "5"}
    for name, prop in PROPERTIES.items():
        for role in prop.roles:
            value = prop.choices[-1] if prop.choices else values.get(name, "5000")
            props = KafkaProperties(**{role: ((name, value),)})
            try:
                props.check("confluent")
            except ConfigError:
                continue  # no equivalent: refused before librdkafka sees it
            config = {"bootstrap.servers": "127.0.0.1:1", "log_level": 0, **props.for_client(role, "confluent")}
            client = (confluent_kafka.Consumer({**config, "group.id": "g"}) if role == "consumer"
                      else confluent_kafka.Producer(config))  # raises KafkaException for a property it lacks
            client.close() if role == "consumer" else client.flush(0)


@pytest.mark.parametrize("name", ["enable.auto.commit", "transactional.id", "group.id", "acks", "sasl.mechanism",
                                  "ssl.truststore.location", "max.poll.records", "key.deserializer"])
def test_a_property_the_worker_owns_is_refused_naming_what_sets_it(name):
    role = "producer" if name in ("transactional.id", "acks") else "consumer"
    with pytest.raises(ConfigError, match=rf"{role} property .*{name}: the worker sets this property itself; set "):
        KafkaSettings(kafka_properties=KafkaProperties(**{role: ((name, "1"),)}))


def test_an_unknown_property_is_refused_with_the_list_of_known_ones():
    with pytest.raises(ConfigError, match=r"fetch\.maximum\.bytes: not a property the worker passes on; those it "
                                          r"does: fetch\.min\.bytes, fetch\.max\.bytes"):
        KafkaSettings(kafka_properties=KafkaProperties(consumer=(("fetch.maximum.bytes", "1"),)))


def test_a_property_of_the_other_role_is_refused_with_a_hint():
    with pytest.raises(ConfigError, match=r"linger\.ms is not a consumer property: did you mean --producer-property"):
        KafkaSettings(kafka_properties=KafkaProperties(consumer=(("linger.ms", "5"),)))


def test_a_property_without_an_equivalent_in_the_chosen_client_is_refused():
    with pytest.raises(ConfigError, match=r"socket\.connection\.setup\.timeout\.ms: kafka-python has no equivalent "
                                          r"of this property; remove it, or use --kafka-client confluent"):
        KafkaSettings(kafka_properties=KafkaProperties(producer=(("socket.connection.setup.timeout.ms", "5000"),)))


@pytest.mark.parametrize("name, value, says", [
    ("linger.ms", "soon", "must be a whole number"),
    ("linger.ms", "-1", "must be >= 0"),
    ("compression.type", "brotli", "must be one of none, gzip, snappy, lz4, zstd"),
])
def test_a_bad_value_is_refused_naming_the_property(name, value, says):
    with pytest.raises(ConfigError, match=f"{name}={value!r}: {says}" if "=" not in says else says):
        KafkaSettings(kafka_properties=KafkaProperties(producer=((name, value),)))


def test_each_client_gets_the_properties_under_its_own_names_and_types():
    props = KafkaProperties(consumer=(("fetch.max.bytes", "1048576"), ("fetch.max.wait.ms", "200"),
                                      ("check.crcs", "false")),
                            producer=(("linger.ms", "25"), ("compression.type", "none"),
                                      ("request.timeout.ms", "9000")))
    assert props.for_client("consumer", "kafka-python") == {"fetch_max_bytes": 1048576, "fetch_max_wait_ms": 200,
                                                            "check_crcs": False}
    assert props.for_client("consumer", "confluent") == {"fetch.max.bytes": 1048576, "fetch.wait.max.ms": 200,
                                                         "check.crcs": False}
    assert props.for_client("producer", "kafka-python") == {"linger_ms": 25, "compression_type": None,
                                                            "request_timeout_ms": 9000}
    assert props.for_client("producer", "confluent") == {"linger.ms": 25, "compression.type": "none",
                                                         "request.timeout.ms": 9000}


def test_request_timeout_of_the_consumer_has_no_librdkafka_equivalent():
    with pytest.raises(ConfigError, match="confluent has no equivalent"):
        KafkaSettings(kafka_client="confluent",
                      kafka_properties=KafkaProperties(consumer=(("request.timeout.ms", "9000"),)))


def test_the_built_clients_carry_the_users_properties_over_the_workers_defaults():
    kafka = KafkaSettings(kafka_bootstrap_servers="127.0.0.1:1", group="g", kafka_properties=KafkaProperties(
        consumer=(("fetch.max.bytes", "4096"),), producer=(("linger.ms", "40"), ("compression.type", "zstd"))))
    assert group_consumer_config(kafka)["fetch_max_bytes"] == 4096
    assert kafka_python_producer(kafka) == {"compression_type": "zstd", "linger_ms": 40}
    confluent = pytest.importorskip("worker.kafka.confluent.source")
    from worker.kafka.confluent.connection import producer_properties as confluent_producer
    confluent_kafka = KafkaSettings(kafka_bootstrap_servers="127.0.0.1:1", group="g", kafka_client="confluent",
                                    kafka_properties=kafka.kafka_properties, reply_compression="zstd")
    assert confluent.consumer_config(confluent_kafka, True)["fetch.max.bytes"] == 4096
    assert confluent_producer(confluent_kafka) == {"compression.type": "zstd", "linger.ms": 40}


def test_reply_compression_and_compression_type_must_agree():
    assert KafkaSettings(reply_compression="lz4").reply_codec == "lz4"
    assert KafkaSettings(kafka_properties=KafkaProperties(producer=(("compression.type", "gzip"),))).reply_codec \
        == "gzip"
    with pytest.raises(ConfigError, match="reply_compression .* is lz4 and the producer property compression.type "
                                          "is gzip: set one of them"):
        KafkaSettings(reply_compression="lz4", kafka_properties=KafkaProperties(producer=(("compression.type",
                                                                                           "gzip"),)))


def test_requests_are_read_committed_unless_told_and_never_uncommitted_with_exactly_once():
    assert Settings.from_values(requests_topic="t").kafka.read_committed
    uncommitted = KafkaProperties(consumer=(("isolation.level", "read_uncommitted"),))
    assert not Settings.from_values(requests_topic="t", kafka_properties=uncommitted).kafka.read_committed
    with pytest.raises(ConfigError, match="isolation.level=read_uncommitted cannot be used with delivery=exactly-once"):
        Settings.from_values(requests_topic="t", kafka_properties=uncommitted, delivery="exactly-once")


def test_file_then_variables_then_flags_each_override_the_one_before(tmp_path):
    config = tmp_path / "worker.toml"
    config.write_text('[kafka.consumer]\n"fetch.max.bytes" = 1000\nclient.rack = "eu-1a"\n'
                      '[kafka.producer]\nlinger.ms = 7\n"batch.size" = 32768\n'
                      'delivery.timeout.ms = 120000\n')  # unquoted: TOML's table "delivery", a setting's name too
    environ = {"STREAMSCORE_KAFKA_CONSUMER_FETCH_MAX_BYTES": "2000", "STREAMSCORE_KAFKA_PRODUCER_LINGER_MS": "8"}
    args = _parse("--producer-property", "linger.ms=9")
    args.config = str(config)
    props = Settings.from_sources(args, {**environ, "STREAMSCORE_REQUESTS_TOPIC": "t"}).kafka.kafka_properties
    assert props.of("consumer") == {"fetch.max.bytes": "2000", "client.rack": "eu-1a"}
    assert props.of("producer") == {"linger.ms": "9", "batch.size": "32768", "delivery.timeout.ms": "120000"}


def test_a_flag_without_equals_is_refused_with_an_example():
    with pytest.raises(ConfigError, match=r"--consumer-property 'fetch.max.bytes': write NAME=VALUE, e.g. "
                                          r"--consumer-property fetch.max.bytes=1048576"):
        KafkaProperties.from_sources(_parse("--consumer-property", "fetch.max.bytes"), {})


def test_the_configuration_files_kafka_table_holds_only_consumer_and_producer(tmp_path):
    config = tmp_path / "worker.toml"
    config.write_text("[kafka.admin]\nretries = 3\n")
    with pytest.raises(ConfigError, match=r"\[kafka\] holds two tables only, \[kafka.consumer\] and "
                                          r"\[kafka.producer\]"):
        read_config_file(str(config))


def test_a_worker_owned_property_in_the_file_is_refused_naming_the_file(tmp_path):
    config = tmp_path / "worker.toml"
    config.write_text('[kafka.consumer]\nenable.auto.commit = true\n')
    args = _parse()
    args.config = str(config)
    with pytest.raises(ConfigError, match=rf"^{config}: Kafka consumer property .* enable.auto.commit: the worker "
                                          "sets this property itself"):
        Settings.from_sources(args, {"STREAMSCORE_REQUESTS_TOPIC": "t"})


def test_the_owned_and_passed_tables_do_not_overlap():
    assert not set(OWNED) & set(PROPERTIES)


def test_docs_interop_shows_the_table_the_code_has():
    page = DOC.read_text(encoding="utf-8")
    for name, roles, kafka_python, librdkafka in table_rows():
        assert f"| `{name}` | {roles} | {kafka_python} | {librdkafka} |" in page, name
    for name in OWNED:
        assert f"`{name}`" in page, name
