"""Where the brokers are and how to reach them, as librdkafka properties: the confluent-kafka clients' twin of
worker/kafka/kafka_python/connection.py, built from the same KafkaSecurity."""

from __future__ import annotations

import base64
import binascii
import logging
import time
from collections.abc import Callable
from typing import Any

import orjson
import structlog
from confluent_kafka import KafkaError

from worker.core.security import PLAINTEXT, KafkaSecurity
from worker.kafka.kafka_python.connection import RECONNECT_BACKOFF_MAX_MS, FileTokenProvider

log = structlog.get_logger(__name__)

LIBRDKAFKA_LOG = logging.getLogger("librdkafka")
UNKNOWN_EXPIRY_S = 60.0  # a token whose expiry cannot be read is asked for again this soon


class FileOAuthCallback:
    """librdkafka's ``oauth_cb``: the token in the file (re-read when it changes), and when it expires.

    librdkafka calls it (from poll(), flush() or consume()) at start and again at 80 % of the lifetime
    returned, so the expiry comes from the token's own ``exp`` claim when it is a JWT; otherwise the file is
    asked again a minute later. Raises ConfigError when the file cannot be read.
    """

    def __init__(self, path: str, clock: Callable[[], float] = time.time) -> None:
        self._tokens = FileTokenProvider(path)
        self._clock = clock

    def __call__(self, _oauthbearer_config: str) -> tuple[str, float]:
        token = self._tokens.token()
        return token, jwt_expiry(token) or self._clock() + UNKNOWN_EXPIRY_S


def jwt_expiry(token: str) -> float | None:
    """The ``exp`` claim (Unix seconds) of a JWT's payload, read without checking the signature; None when
    the token is no JWT or has none. The broker validates the token: this only says when to read it again."""
    parts = token.split(".")
    if len(parts) != 3:
        return None
    try:
        claims = orjson.loads(base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4)))
    except (binascii.Error, ValueError):
        return None
    expiry = claims.get("exp") if isinstance(claims, dict) else None
    if isinstance(expiry, bool) or not isinstance(expiry, int | float):
        return None
    return float(expiry)


def log_client_error(error: KafkaError) -> None:
    """librdkafka's ``error_cb``: it retries connections and authentication itself; say what it met."""
    log.warning("kafka_client_error", code=error.name(), reason=error.str(), fatal=error.fatal())


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
    if security.uses_sasl:
        config["sasl.mechanisms"] = security.sasl_mechanism
        if security.sasl_mechanism == "OAUTHBEARER":
            config["oauth_cb"] = FileOAuthCallback(security.sasl_oauth_token_file)
        else:
            config.update({"sasl.username": security.sasl_username, "sasl.password": security.password()})
    return config
