"""Where the brokers are and how to reach them, as librdkafka properties: the confluent-kafka clients' twin of
worker/kafka/kafka_python/connection.py, built from the same KafkaSecurity (tokens: worker/kafka/tokens.py)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import structlog
from confluent_kafka import KafkaError

from worker.core.sections import KafkaSettings
from worker.core.security import PLAINTEXT, KafkaSecurity
from worker.kafka.connection import PASSWORD_MECHANISMS, RECONNECT_BACKOFF_MAX_MS, credentials_refused_while_running
from worker.kafka.tokens import FileOAuthCallback

log = structlog.get_logger(__name__)

LIBRDKAFKA_LOG = logging.getLogger("librdkafka")


def log_client_error(error: KafkaError) -> None:
    """librdkafka's ``error_cb``: it retries connections and authentication itself; say what it met."""
    log.warning("kafka_client_error", code=error.name(), reason=error.str(), fatal=error.fatal())


def group_error_callback(security: KafkaSecurity) -> Callable[[KafkaError], None]:
    """A group consumer's ``error_cb``: what ``log_client_error`` says, and with a password mechanism (PLAIN,
    SCRAM) an authentication the brokers refuse raised out of the poll (confluent-kafka raises a callback's
    exception there), where librdkafka would retry it for ever and the worker answer nothing."""
    if security.sasl_mechanism not in PASSWORD_MECHANISMS:
        return log_client_error

    def stop_when_password_refused(error: KafkaError) -> None:
        log_client_error(error)
        if error.code() == KafkaError._AUTHENTICATION:
            raise credentials_refused_while_running(security.sasl_mechanism, error.str())

    return stop_when_password_refused


def client_config(bootstrap_servers: str, security: KafkaSecurity = PLAINTEXT) -> dict[str, Any]:
    """librdkafka properties for the brokers at ``bootstrap_servers`` (host:port[,host:port]) with ``security``.

    Reads the password file now. Raises ConfigError when it cannot be read.
    """
    # librdkafka's own log lines go through the logging module (worker/logs.py renders them), not to stderr.
    config: dict[str, Any] = {"bootstrap.servers": bootstrap_servers, "security.protocol": security.protocol,
                              "error_cb": log_client_error, "logger": LIBRDKAFKA_LOG,
                              "reconnect.backoff.max.ms": RECONNECT_BACKOFF_MAX_MS}
    if security.uses_ssl:
        config["ssl.endpoint.identification.algorithm"] = "https" if security.ssl_check_hostname else "none"
        if security.ssl_cafile:
            config["ssl.ca.location"] = security.ssl_cafile
        if security.ssl_certfile:  # without a key file, the key is in the certificate's PEM file (as for Python's ssl)
            config["ssl.certificate.location"] = security.ssl_certfile
            config["ssl.key.location"] = security.ssl_keyfile or security.ssl_certfile
            if security.ssl_key_password_file:
                config["ssl.key.password"] = security.key_password()
    if security.uses_sasl:
        config["sasl.mechanisms"] = security.sasl_mechanism
        if security.sasl_mechanism == "OAUTHBEARER":
            config["oauth_cb"] = FileOAuthCallback(security.sasl_oauth_token_file)
        else:
            config.update({"sasl.username": security.sasl_username, "sasl.password": security.password()})
    return config


def producer_properties(kafka: KafkaSettings) -> dict[str, Any]:
    """librdkafka properties of a reply producer from the settings: the replies' codec and the user's producer
    properties (worker/core/kafka_properties.py)."""
    return {"compression.type": kafka.reply_codec, **kafka.kafka_properties.for_client("producer", "confluent")}
