"""The settings against what the broker said at start: its session timeout range and its topics."""

import pytest

from worker.core.broker_fit import (
    KAFKA_DEFAULT_SESSION_TIMEOUTS,
    SessionTimeouts,
    check_group_protocol,
    check_session_timeout,
    check_topics_exist,
)
from worker.core.errors import ConfigError
from worker.core.settings import Settings

BROKER = SessionTimeouts(6_000, 300_000, from_broker=True)


def settings(**env):
    return Settings.from_sources(None, {"STREAMSCORE_REQUESTS_TOPIC": "req", **env}).kafka


@pytest.mark.parametrize("timeout_ms, fits", [(6_000, True), (45_000, True), (300_000, True), (5_999, False),
                                              (300_001, False)])
def test_the_session_timeout_must_be_in_the_brokers_range(timeout_ms, fits):
    chosen = settings(STREAMSCORE_SESSION_TIMEOUT_MS=str(timeout_ms), STREAMSCORE_MAX_POLL_INTERVAL_MS="400000")
    if fits:
        check_session_timeout(chosen, BROKER)
        return
    with pytest.raises(ConfigError) as refused:
        check_session_timeout(chosen, BROKER)
    assert str(refused.value) == (
        f"session_timeout_ms={timeout_ms} (--session-timeout-ms, STREAMSCORE_SESSION_TIMEOUT_MS) is outside what "
        "the broker lets a consumer group use: 6000 to 300000 ms (the broker's group.min.session.timeout.ms and "
        "group.max.session.timeout.ms); the group join would fail with InvalidSessionTimeoutError. Choose a "
        "value in that range")


def test_without_the_brokers_figures_kafkas_defaults_stand_in_and_the_message_says_so():
    assert (KAFKA_DEFAULT_SESSION_TIMEOUTS.low, KAFKA_DEFAULT_SESSION_TIMEOUTS.high) == (6_000, 1_800_000)
    with pytest.raises(ConfigError, match=r"6000 to 1800000 ms \(Kafka's defaults of group.min.session.timeout.ms and "
                                          r"group.max.session.timeout.ms: the broker's could not be read\)"):
        check_session_timeout(settings(STREAMSCORE_SESSION_TIMEOUT_MS="3001"), KAFKA_DEFAULT_SESSION_TIMEOUTS)


def test_with_the_consumer_group_protocol_the_broker_sets_the_session_timeout_itself(monkeypatch):
    monkeypatch.setattr("worker.core.clients.find_spec", lambda name: object())  # installed or not, here
    consumer = settings(STREAMSCORE_KAFKA_CLIENT="confluent", STREAMSCORE_KAFKA_GROUP_PROTOCOL="consumer")
    check_session_timeout(consumer, SessionTimeouts(60_000, 60_000, from_broker=True))  # 45000 is not sent


def test_the_topics_the_worker_reads_and_writes_must_exist():
    check_topics_exist(settings(), {"req", "req.replies", "req.dlq", "other"})
    with pytest.raises(ConfigError) as refused:
        check_topics_exist(settings(STREAMSCORE_REPLY_TOPIC="req.replys"), {"req", "req.replies", "req.dlq"})
    assert str(refused.value) == (
        "reply_topic 'req.replys' (--reply-topic, STREAMSCORE_REPLY_TOPIC) does not exist on the broker (or this "
        "client may not describe it); the worker never creates topics: create it (`python -m producer "
        "create-topic req.replys --partitions 4`), or name an existing one")


def test_every_missing_topic_is_named_in_one_line():
    with pytest.raises(ConfigError) as refused:
        check_topics_exist(settings(), {"other"})
    message = str(refused.value)
    assert "\n" not in message
    assert message.startswith("requests_topic 'req' (--requests-topic, STREAMSCORE_REQUESTS_TOPIC), reply_topic "
                              "'req.replies' (--reply-topic, STREAMSCORE_REPLY_TOPIC) and dead_letter_topic 'req.dlq' "
                              "(--dead-letter-topic, STREAMSCORE_DEAD_LETTER_TOPIC) do not exist on the broker")
    assert message.endswith("create them (`python -m producer create-topic req --partitions 4`, `python -m producer "
                            "create-topic req.replies --partitions 4`, `python -m producer create-topic req.dlq "
                            "--partitions 1`), or name existing ones")


def test_the_consumer_group_protocol_needs_a_broker_that_runs_it():
    consumer = settings(STREAMSCORE_KAFKA_CLIENT="confluent", STREAMSCORE_KAFKA_GROUP_PROTOCOL="consumer")
    check_group_protocol(consumer, {"classic", "consumer", "streams"})
    check_group_protocol(consumer, None)  # unreadable: let through, as before
    check_group_protocol(settings(), {"classic"})
    with pytest.raises(ConfigError, match=r"^kafka_group_protocol=consumer \(--kafka-group-protocol, "
                                          r"STREAMSCORE_KAFKA_GROUP_PROTOCOL\): the broker runs the group protocols "
                                          r"classic only .* use --kafka-group-protocol classic$"):
        check_group_protocol(consumer, {"classic"})
