"""Misfits with the broker stop the worker at start, before its model loads, naming the setting: a session
timeout outside the range the broker allows, and a requests, reply or dead-letter topic the broker does not have
(which is then not created either). On both Kafka clients (the ``kafka_client`` fixture)."""

import socket
import threading

import pytest
from kafka import KafkaAdminClient
from kafka.errors import ClusterAuthorizationFailedError
from structlog.testing import capture_logs

from tests.integration.kit import start_worker
from worker.core.errors import ServiceUnavailable
from worker.core.security import PLAINTEXT
from worker.kafka.broker_facts import read_broker_facts
from worker.kafka.kafka_python.broker_facts import KafkaPythonAdmin
from worker.kafka.kafka_python.connection import client_config

DEBUG = ("--log-level", "debug")  # model_loading is a debug line


def refusal(worker):
    """The worker's exit code and its one worker_failed line; it must not have started loading its model."""
    code = worker.process.wait(timeout=60)
    events = worker.events()
    assert not [e for e in events if e.get("event") == "model_loading"], worker.log()
    (failed,) = [e for e in events if e.get("event") == "worker_failed"]
    assert "Traceback" not in worker.log()
    return code, failed["error"]


@pytest.mark.parametrize("timeout_ms", [5_000, 1_800_001])
def test_a_session_timeout_outside_the_brokers_range_is_refused_at_start(bootstrap, redis_url, topics, tmp_path,
                                                                         kafka_client, timeout_ms):
    worker = start_worker(bootstrap, redis_url, topics, tmp_path, "--kafka-client", kafka_client,
                          "--session-timeout-ms", str(timeout_ms), "--max-poll-interval-ms", "1800001", *DEBUG)
    code, error = refusal(worker)
    assert code == 2, worker.log()
    assert error.startswith(f"session_timeout_ms={timeout_ms} (--session-timeout-ms, STREAMSCORE_SESSION_TIMEOUT_MS) "
                            "is outside what the broker lets a consumer group use: 6000 to 1800000 ms (the broker's "
                            "group.min.session.timeout.ms and group.max.session.timeout.ms)"), error


@pytest.mark.parametrize("setting, flag", [("reply_topic", "--reply-topic"),
                                           ("dead_letter_topic", "--dead-letter-topic"),
                                           ("requests_topic", "--requests-topic")])
def test_a_topic_the_broker_lacks_is_refused_at_start_and_not_created(bootstrap, redis_url, topics, tmp_path,
                                                                      kafka_client, setting, flag):
    missing = f"{topics.requests}.misspelled"
    worker = start_worker(bootstrap, redis_url, topics, tmp_path, "--kafka-client", kafka_client, flag, missing,
                          *DEBUG)
    code, error = refusal(worker)
    assert code == 2, worker.log()
    assert error.startswith(f"{setting} {missing!r} ({flag}, STREAMSCORE_{setting.upper()}) does not exist on the "
                            "broker"), error
    assert f"`python -m producer create-topic {missing} --partitions " in error
    admin = KafkaAdminClient(**client_config(bootstrap))
    try:
        assert missing not in admin.list_topics()
    finally:
        admin.close()


def broker_admin(kafka_client, bootstrap):
    if kafka_client == "confluent":
        from worker.kafka.confluent.broker_facts import ConfluentAdmin

        return ConfluentAdmin(bootstrap, PLAINTEXT)
    return KafkaPythonAdmin(bootstrap, PLAINTEXT)


def test_the_brokers_topics_and_session_timeout_range_are_read(bootstrap, topics, kafka_client):
    facts = read_broker_facts(broker_admin(kafka_client, bootstrap), bootstrap, expected_topics=[topics.requests])
    assert topics.requests in facts.topics
    assert (facts.session_timeouts.low, facts.session_timeouts.high, facts.session_timeouts.from_broker) == (
        6_000, 1_800_000, True)  # the local broker keeps Kafka's defaults, read from it here
    assert {"classic", "consumer"} <= facts.group_protocols  # Kafka 4's default


def test_kafkas_default_session_timeouts_stand_in_when_the_broker_refuses_to_say(bootstrap, topics, monkeypatch):

    def refused(self, *args, **kwargs):
        raise ClusterAuthorizationFailedError("no DESCRIBE_CONFIGS on the cluster")

    monkeypatch.setattr(KafkaAdminClient, "describe_configs", refused)
    with capture_logs() as logs:
        facts = read_broker_facts(KafkaPythonAdmin(bootstrap, PLAINTEXT), bootstrap)
    assert not facts.session_timeouts.from_broker and topics.requests in facts.topics
    assert facts.group_protocols is None  # unknown: a consumer group protocol asked for is let through
    warning, protocols = [e for e in logs if e["event"] == "broker_configs_unreadable"]
    assert "ClusterAuthorizationFailedError" in warning["error"] and warning["using"] == [6_000, 1_800_000]
    assert protocols["configs"] == ["group.coordinator.rebalance.protocols"]


def test_an_admin_that_reaches_no_broker_lets_go_of_its_io_thread_and_sockets():
    """kafka-python's KafkaAdminClient starts its IO thread before its bootstrap, and left it (and its sockets)
    behind when no broker answered: the broker watch builds one a look until a broker answers."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        nowhere = f"127.0.0.1:{sock.getsockname()[1]}"
    threads = threading.active_count()
    try:
        KafkaPythonAdmin(nowhere, PLAINTEXT, timeout_s=1.0, client_id="nowhere")
    except ServiceUnavailable:
        pass  # and let go of it: its traceback holds the half-built client
    else:
        pytest.fail("an admin was built with no broker to reach")
    assert threading.active_count() == threads
