"""A SASL password the brokers refuse once the worker runs (rotated) stops it with exit 2 on both clients, naming
the setting, where kafka-python died with a traceback and librdkafka retried for ever. The password is read when
the clients are built: the restart reads the new one. OAUTHBEARER's token file is read again at each refresh, so a
token refused for a while is left to recover, as before."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError
from kafka.errors import SaslAuthenticationFailedError

from worker.core.errors import ConfigError
from worker.core.security import KafkaSecurity
from worker.kafka.confluent.connection import group_error_callback, log_client_error
from worker.kafka.kafka_python import source as kafka_python_source
from worker.kafka.kafka_python.source import KafkaSource

REFUSED = "refused this worker's SASL SCRAM-SHA-512 password while it ran"
SCRAM = KafkaSecurity(protocol="SASL_SSL", sasl_mechanism="SCRAM-SHA-512", sasl_username="u", sasl_password="p")
AUTH = KafkaError(KafkaError._AUTHENTICATION, "SASL authentication error: Authentication failed due to invalid "
                                              "credentials")


def test_librdkafka_s_authentication_error_stops_a_password_mechanism_and_other_errors_are_only_said():
    stop = group_error_callback(SCRAM)
    with pytest.raises(ConfigError, match=f"{REFUSED} .*invalid credentials.*KAFKA_SASL_PASSWORD_FILE"):
        stop(AUTH)
    stop(KafkaError(KafkaError._TRANSPORT, "Connection refused"))  # retried by librdkafka
    oauth = KafkaSecurity(protocol="SASL_SSL", sasl_mechanism="OAUTHBEARER", sasl_oauth_token_file=__file__)
    assert group_error_callback(oauth) is log_client_error  # a token refused for a while: left to recover


@pytest.mark.parametrize("mechanism, stops", [("SCRAM-SHA-512", True), ("OAUTHBEARER", False)])
def test_kafka_python_s_refused_authentication_out_of_the_poll(monkeypatch, mechanism, stops):
    def refused(*_args: object) -> None:
        raise SaslAuthenticationFailedError(f"invalid credentials with SASL mechanism {mechanism}")

    source = KafkaSource.__new__(KafkaSource)
    source._consumer = None  # fetch, replaced, takes it
    source._security = KafkaSecurity(protocol="SASL_SSL", sasl_mechanism=mechanism, sasl_username="u",
                                     sasl_password="p") if stops else KafkaSecurity(
        protocol="SASL_SSL", sasl_mechanism=mechanism, sasl_oauth_token_file=__file__)
    monkeypatch.setattr(source, "_rewound", lambda _timeout_s: True)
    monkeypatch.setattr(kafka_python_source, "fetch", refused)
    with pytest.raises(ConfigError if stops else SaslAuthenticationFailedError):
        source.poll(0.1, 10)
