import argparse
import re
import socket

import pytest

from worker.core.errors import ConfigError
from worker.core.sections import broker_address
from worker.core.settings import Settings, add_flags, require_services


def parse(argv):
    parser = argparse.ArgumentParser()
    add_flags(parser)
    return parser.parse_args(argv)


def test_env_then_flags_then_derived_defaults():
    env = {"KAFKA_BOOTSTRAP_SERVERS": "k:9092", "REDIS_URL": "redis://r:6379/0",
           "STREAMSCORE_MAX_BATCH_SIZE": "32", "STREAMSCORE_REQUESTS_TOPIC": "req"}
    settings = Settings.from_sources(parse(["--max-batch-size", "128"]), env)
    assert settings.batching.max_batch_size == 128  # the flag wins
    assert settings.kafka.kafka_bootstrap_servers == "k:9092"
    assert (settings.kafka.reply_topic, settings.kafka.dead_letter_topic, settings.kafka.group) == (
        "req.replies", "req.dlq", "streamscore-churn")


@pytest.mark.parametrize("env, named", [
    ({"STREAMSCORE_MAX_BATCH_SIZE": "lots"}, "STREAMSCORE_MAX_BATCH_SIZE"),
    ({"STREAMSCORE_MAX_BACH_SIZE": "3"}, "STREAMSCORE_MAX_BACH_SIZE"),
    ({"STREAMSCORE_MAX_BATCH_SIZE": "0"}, "max_batch_size"),
    ({"STREAMSCORE_MAX_BATCH_SIZE": "100000000"},
     r"^max_batch_size \(--max-batch-size, STREAMSCORE_MAX_BATCH_SIZE\) must be at most 65536, got 100000000"),
    ({"STREAMSCORE_AUTO_OFFSET_RESET": "middle"}, "auto_offset_reset"),
    ({"STREAMSCORE_DEVICE": "tpu"}, "device"),
    ({"STREAMSCORE_DEVICE": "cudax"}, r"device must be auto, cpu, cuda or cuda:N \(--device, STREAMSCORE_DEVICE\), "
                                      r"got 'cudax'"),
    ({"STREAMSCORE_DEVICE": "cuda:-1"}, "device must be"),
    ({"STREAMSCORE_DELIVERY": "at-most-once"}, "delivery"),
    ({"STREAMSCORE_TRANSACTIONAL_ID": "w1"}, "transactional_id"),
    ({"STREAMSCORE_DELIVERY": "exactly-once", "STREAMSCORE_COMMIT_INTERVAL_MS": "20000"},
     r"commit_interval_ms \(20000\) must be at most 10000 with delivery=exactly-once"),
    ({"STREAMSCORE_AMP": "fp8"}, r"amp \(--amp, STREAMSCORE_AMP\) must be off, bf16 or fp16"),
    ({"STREAMSCORE_AMP": "fp16", "STREAMSCORE_DEVICE": "cpu"}, "amp=fp16 needs a CUDA device"),
    ({"REDIS_URL": "http://nope"}, "REDIS_URL"),
    ({"STREAMSCORE_MAX_WAIT_MS": "400000"}, "max_poll_interval_ms"),
    ({"STREAMSCORE_DEDUP_LEASE_MS": "10", "STREAMSCORE_MAX_WAIT_MS": "10"}, "dedup_lease_ms"),
    ({"STREAMSCORE_REQUESTS_TOPIC": "t", "STREAMSCORE_REPLY_TOPIC": "t"},
     r"^reply_topic \(--reply-topic, STREAMSCORE_REPLY_TOPIC\) must differ from requests_topic \(--requests-topic, "
     r"STREAMSCORE_REQUESTS_TOPIC\): both are 't', and the worker would consume its own replies as requests"),
    ({"STREAMSCORE_REQUESTS_TOPIC": "t", "STREAMSCORE_DEAD_LETTER_TOPIC": "t"},
     r"^dead_letter_topic \(--dead-letter-topic, STREAMSCORE_DEAD_LETTER_TOPIC\) must differ from requests_topic "
     r"\(--requests-topic, STREAMSCORE_REQUESTS_TOPIC\): both are 't'"),
    ({"STREAMSCORE_SESSION_TIMEOUT_MS": "3000"},
     r"^session_timeout_ms \(--session-timeout-ms, STREAMSCORE_SESSION_TIMEOUT_MS\) must be above 3000 with "
     r"kafka_client=kafka-python, got 3000: kafka-python heartbeats every 3000 ms"),
    ({"STREAMSCORE_KAFKA_CLIENT": "librdkafka"},
     r"kafka_client \(--kafka-client, STREAMSCORE_KAFKA_CLIENT\) must be kafka-python or confluent"),
    ({"STREAMSCORE_KAFKA_GROUP_PROTOCOL": "share"},
     r"kafka_group_protocol \(--kafka-group-protocol, STREAMSCORE_KAFKA_GROUP_PROTOCOL\) must be classic or consumer"),
    ({"STREAMSCORE_KAFKA_GROUP_PROTOCOL": "consumer"},
     r"kafka_group_protocol=consumer \(--kafka-group-protocol, KIP-848\) needs --kafka-client confluent"),
    *[({"KAFKA_BOOTSTRAP_SERVERS": servers}, rf"^kafka_bootstrap_servers \(--bootstrap-servers, "
                                             rf"KAFKA_BOOTSTRAP_SERVERS\): '{re.escape(wrong)}' is not HOST:PORT")
      for servers, wrong in [("host:port", "host:port"), ("a:1,,b:2", ""), ("a b:9092", "a b:9092"),
                             ("a:0", "a:0"), ("a:65536", "a:65536"), ("[::1:9092", "[::1:9092")]],
])
def test_bad_settings_name_the_setting(env, named):
    with pytest.raises(ConfigError, match=named):
        Settings.from_sources(None, env)


@pytest.mark.parametrize("missing", ["KAFKA_BOOTSTRAP_SERVERS", "REDIS_URL", "requests_topic"])
def test_streaming_needs_services_and_a_topic(missing):
    env = {"KAFKA_BOOTSTRAP_SERVERS": "k:1", "REDIS_URL": "memory://", "STREAMSCORE_REQUESTS_TOPIC": "t"}
    env.pop({"requests_topic": "STREAMSCORE_REQUESTS_TOPIC"}.get(missing, missing))
    with pytest.raises(ConfigError, match=missing):
        require_services(Settings.from_sources(None, env))


@pytest.mark.parametrize("servers", ["a:9092", "broker-1:9092, broker-2:9093", "[::1]:9092", "10.0.0.1:65535",
                                     "kafka", "PLAINTEXT://a:9092,SASL_SSL://b"])
def test_broker_lists_the_kafka_clients_take_are_taken(servers):
    assert Settings.from_sources(None, {"KAFKA_BOOTSTRAP_SERVERS": servers}).kafka.kafka_bootstrap_servers == servers


@pytest.mark.parametrize("address, read", [("a:9093", ("a", 9093)), (" kafka ", ("kafka", 9092)),
                                           ("[::1]:19092", ("::1", 19092)), ("SSL://b:9094", ("b", 9094)),
                                           ("a:b", None), ("", None)])
def test_a_broker_address_is_read_as_the_clients_read_it(address, read):
    assert broker_address(address) == read


def test_the_largest_batch_size_allowed_is_accepted():
    assert Settings.from_sources(None, {"STREAMSCORE_MAX_BATCH_SIZE": "65536"}).batching.max_batch_size == 65_536


def test_amp_is_off_by_default_and_bf16_is_allowed_on_cpu():
    assert Settings.from_sources(None, {}).model.amp == "off"
    assert Settings.from_sources(parse(["--amp", "bf16", "--device", "cpu"]), {}).model.amp == "bf16"
    assert Settings.from_sources(None, {"STREAMSCORE_AMP": "fp16", "STREAMSCORE_DEVICE": "cuda"}).model.amp == "fp16"


def test_fp16_on_cpu_says_what_to_use_instead():
    with pytest.raises(ConfigError, match=r"use --amp bf16 \(STREAMSCORE_AMP=bf16\) on CPU, or --amp off"):
        Settings.from_sources(parse(["--amp", "fp16", "--device", "cpu"]), {})


def test_repr_hides_the_redis_password():
    settings = Settings.from_sources(None, {"REDIS_URL": "redis://user:s3cret@host:6379/0"})
    assert "s3cret" not in repr(settings)
    assert "user:***@host:6379" in repr(settings)


def test_a_poll_worth_of_batches_must_fit_in_max_poll_interval():
    from worker.app import check_poll_interval

    settings = Settings.from_sources(None, {"STREAMSCORE_MAX_POLL_RECORDS": "500", "STREAMSCORE_MAX_BATCH_SIZE": "50",
                                            "STREAMSCORE_MAX_POLL_INTERVAL_MS": "10000"})
    check_poll_interval(settings, settings.batching, batch_s=0.4)  # 10 batches: 4 s, within half of 10 s
    with pytest.raises(ConfigError, match="max_poll_records=500: 10 batches"):
        check_poll_interval(settings, settings.batching, batch_s=0.6)
    with pytest.raises(ConfigError, match=r"at 0.60 s each estimated from warmup batches of 8\)"):
        check_poll_interval(settings, settings.batching, batch_s=0.6, estimated_from=8)


def test_exactly_once_derives_a_transactional_id_per_worker():
    env = {"STREAMSCORE_REQUESTS_TOPIC": "req", "STREAMSCORE_DELIVERY": "exactly-once"}
    derived = Settings.from_sources(parse(["--client-id", "w7"]), env).transactional_id
    assert derived == f"streamscore-churn.w7.{socket.gethostname()}"
    assert Settings.from_sources(parse(["--transactional-id", "mine"]), env).transactional_id == "mine"
    assert Settings.from_sources(None, {"STREAMSCORE_REQUESTS_TOPIC": "req"}).transactional_id == ""


def test_the_confluent_client_without_its_package_says_to_install_the_extra(monkeypatch):
    monkeypatch.setattr("worker.core.clients.find_spec", lambda name: None if name == "confluent_kafka" else object())
    with pytest.raises(ConfigError, match=r"kafka_client=confluent \(--kafka-client, STREAMSCORE_KAFKA_CLIENT\) "
                       r"needs the confluent-kafka package.*install the `confluent` extra"):
        Settings.from_sources(parse(["--kafka-client", "confluent"]), {})
    assert Settings.from_sources(None, {}).kafka.kafka_client == "kafka-python"  # the default needs nothing more


def test_librdkafka_wants_max_poll_interval_at_least_the_session_timeout(monkeypatch):
    monkeypatch.setattr("worker.core.clients.find_spec", lambda name: object())
    short = ["--max-poll-interval-ms", "5000", "--session-timeout-ms", "6000"]
    assert Settings.from_sources(parse(short), {}).kafka.max_poll_interval_ms == 5000  # kafka-python takes it
    with pytest.raises(ConfigError, match=r"max_poll_interval_ms \(5000\) must be at least session_timeout_ms"):
        Settings.from_sources(parse([*short, "--kafka-client", "confluent"]), {})


@pytest.mark.parametrize("flags, named", [
    (["--assignor", "cooperative-sticky"], r"assignor=cooperative-sticky \(--assignor\) does not apply"),
    (["--session-timeout-ms", "10000"], r"session_timeout_ms=10000 \(--session-timeout-ms\) does not apply"),
])
def test_the_consumer_group_protocol_takes_the_assignor_and_session_timeout_from_the_broker(monkeypatch, flags,
                                                                                            named):
    monkeypatch.setattr("worker.core.clients.find_spec", lambda name: object())  # installed or not, here
    consumer = ["--kafka-client", "confluent", "--kafka-group-protocol", "consumer"]
    assert Settings.from_sources(parse(consumer), {}).kafka.kafka_group_protocol == "consumer"
    with pytest.raises(ConfigError, match=named):
        Settings.from_sources(parse([*consumer, *flags]), {})


# What Kubernetes sets in every pod for the Services of its namespace named streamscore, streamscore-worker and
# schema-registry (enableServiceLinks), IPv4 and IPv6.
SERVICE_LINKS = {
    "STREAMSCORE_SERVICE_HOST": "10.96.0.10", "STREAMSCORE_SERVICE_PORT": "8080",
    "STREAMSCORE_SERVICE_PORT_HTTP": "8080", "STREAMSCORE_PORT": "tcp://10.96.0.10:8080",
    "STREAMSCORE_PORT_8080_TCP": "tcp://10.96.0.10:8080", "STREAMSCORE_PORT_8080_TCP_PROTO": "tcp",
    "STREAMSCORE_PORT_8080_TCP_PORT": "8080", "STREAMSCORE_PORT_8080_TCP_ADDR": "10.96.0.10",
    "STREAMSCORE_WORKER_PORT": "tcp://[fd00::a]:8080", "STREAMSCORE_WORKER_SERVICE_HOST": "fd00::a",
    "SCHEMA_REGISTRY_PORT": "tcp://10.96.0.11:8081", "SCHEMA_REGISTRY_SERVICE_HOST": "10.96.0.11",
}


def test_the_variables_kubernetes_sets_for_services_are_not_refused_as_settings():
    settings = Settings.from_sources(None, {**SERVICE_LINKS, "STREAMSCORE_MAX_BATCH_SIZE": "32"})
    assert settings.batching.max_batch_size == 32


def test_a_service_link_named_as_a_setting_is_not_read_as_it():
    """A Service named streamscore-http makes STREAMSCORE_HTTP_PORT=tcp://...: not the port to serve on."""
    links = {"STREAMSCORE_HTTP_PORT": "tcp://10.96.0.12:9100", "STREAMSCORE_HTTP_SERVICE_HOST": "10.96.0.12"}
    assert Settings.from_sources(None, links).operations.http_port == 0
    assert Settings.from_sources(None, {"STREAMSCORE_HTTP_PORT": "9100"}).operations.http_port == 9100


@pytest.mark.parametrize("env, named", [
    ({"STREAMSCORE_HTP_PORT": "8080"}, "unknown setting STREAMSCORE_HTP_PORT; did you mean STREAMSCORE_HTTP_PORT?"),
    ({"STREAMSCORE_WORKER_PORT": "8080"}, "unknown setting STREAMSCORE_WORKER_PORT"),  # not a link's value
])
def test_a_misspelt_setting_shaped_like_a_service_link_is_still_refused(env, named):
    with pytest.raises(ConfigError, match=named):
        Settings.from_sources(None, env)


def test_under_redis_only_a_near_miss_of_a_setting_is_refused():
    """REDIS_ is every Redis client's prefix: another program's variables pass, a misspelt setting does not."""
    others = {"REDIS_HOST": "cache", "REDIS_PORT": "6379", "REDIS_PASSWORD": "x", "REDIS_DB": "2",
              "REDIS_SENTINEL_PASSWORD": "y"}  # a setting's name less _FILE: another program's secret
    assert Settings.from_sources(None, {**others, "REDIS_URL": "redis://cache:6379/0"}).dedup.redis_url == (
        "redis://cache:6379/0")
    with pytest.raises(ConfigError, match="unknown setting REDIS_PASSWORD_FLE; did you mean REDIS_PASSWORD_FILE"):
        Settings.from_sources(None, {"REDIS_PASSWORD_FLE": "/run/secrets/redis"})
