"""SASL credentials the brokers refuse once the worker runs (a rotated password) stop it with exit 2 on both
clients, naming the setting, where kafka-python died with a traceback and librdkafka retried for ever. The
credentials are read when the clients are built: the restart reads the new ones."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError
from kafka.errors import SaslAuthenticationFailedError

from worker.core.errors import ConfigError
from worker.kafka.confluent.connection import stop_when_credentials_refused
from worker.kafka.kafka_python import source as kafka_python_source
from worker.kafka.kafka_python.source import KafkaSource

REFUSED = "refused this worker's SASL credentials while it ran"


def test_librdkafka_s_authentication_error_is_raised_out_of_the_poll_and_other_errors_are_only_said():
    with pytest.raises(ConfigError, match=f"{REFUSED} .*invalid credentials.*KAFKA_SASL_PASSWORD_FILE"):
        stop_when_credentials_refused(KafkaError(KafkaError._AUTHENTICATION, "SASL authentication error: "
                                                 "Authentication failed due to invalid credentials"))
    stop_when_credentials_refused(KafkaError(KafkaError._TRANSPORT, "Connection refused"))  # retried by librdkafka


def test_kafka_python_s_refused_authentication_out_of_the_poll_stops_the_worker(monkeypatch):
    def refused(*_args: object) -> None:
        raise SaslAuthenticationFailedError("invalid credentials with SASL mechanism SCRAM-SHA-512")

    source = KafkaSource.__new__(KafkaSource)
    source._consumer = None  # fetch, replaced, takes it
    monkeypatch.setattr(source, "_rewound", lambda _timeout_s: True)
    monkeypatch.setattr(kafka_python_source, "fetch", refused)
    with pytest.raises(ConfigError, match=f"{REFUSED} .*SCRAM-SHA-512"):
        source.poll(0.1, 10)
