"""Where the brokers are and how to reach them, as kafka-python options: every Kafka client of the project
(worker, backfill, producer side, bench, test kits) is built from ``client_config``."""

from __future__ import annotations

from typing import Any

from kafka.net.sasl.oauth import AbstractTokenProvider

from worker.core.sections import KafkaSettings
from worker.core.security import PLAINTEXT, KafkaSecurity
from worker.kafka.connection import RECONNECT_BACKOFF_MAX_MS, Unprinted
from worker.kafka.tokens import TokenFile


class FileTokenProvider(TokenFile, AbstractTokenProvider):  # type: ignore[misc]
    """kafka-python's OAUTHBEARER token provider over a TokenFile (worker/kafka/tokens.py): kafka-python
    re-authenticates before the session the broker granted ends, and the next token is read then."""


def client_config(bootstrap_servers: str, security: KafkaSecurity = PLAINTEXT) -> dict[str, Any]:
    """kafka-python options for the brokers at ``bootstrap_servers`` (host:port[,host:port]) with ``security``.

    Reads the password file now. Raises ConfigError when it cannot be read.
    """
    config: dict[str, Any] = {"bootstrap_servers": bootstrap_servers.split(","),
                              "security_protocol": security.protocol,
                              "reconnect_backoff_max_ms": RECONNECT_BACKOFF_MAX_MS}
    if security.uses_ssl:
        config.update(ssl_check_hostname=security.ssl_check_hostname, ssl_cafile=security.ssl_cafile or None,
                      ssl_certfile=security.ssl_certfile or None, ssl_keyfile=security.ssl_keyfile or None,
                      ssl_password=None if (password := security.key_password()) is None else Unprinted(password))
    if security.uses_sasl:
        config["sasl_mechanism"] = security.sasl_mechanism
        if security.sasl_mechanism == "OAUTHBEARER":
            config["sasl_oauth_token_provider"] = FileTokenProvider(security.sasl_oauth_token_file)
        else:
            config.update(sasl_plain_username=security.sasl_username,
                          sasl_plain_password=Unprinted(security.password()))
    return config


def creating_no_topics(cluster: Any) -> None:
    """Make a kafka-python client's metadata requests ask the broker to create no topic. kafka-python 3.0.12
    builds its ClusterMetadata without the client's ``allow_auto_create_topics``, so that every producer
    and consumer asks for the topics it names to be created, which a broker with auto.create.topics.enable
    (Kafka's default) does: a send to a ``reply_to`` topic deleted meanwhile would create it again."""
    cluster.config["allow_auto_create_topics"] = False


def producer_properties(kafka: KafkaSettings) -> dict[str, Any]:
    """kafka-python options of a reply producer from the settings: the replies' codec and the user's producer
    properties (worker/core/kafka_properties.py)."""
    codec = kafka.reply_codec
    return {"compression_type": None if codec == "none" else codec,
            **kafka.kafka_properties.for_client("producer", "kafka-python")}
