"""Where the brokers are and how to reach them, as kafka-python options: every Kafka client of the project
(worker, backfill, producer side, bench, test kits) is built from ``client_config``."""

from __future__ import annotations

import os
import threading
from typing import Any

from kafka.net.sasl.oauth import AbstractTokenProvider

from worker.core.errors import ConfigError
from worker.core.security import PLAINTEXT, KafkaSecurity, read_secret_file


class FileTokenProvider(AbstractTokenProvider):  # type: ignore[misc]
    """OAUTHBEARER tokens from a file that something else keeps fresh (a sidecar, a CronJob, a CSI driver).

    The file is read again whenever its modification time or size changes, so a refreshed token is used by
    the next authentication (kafka-python re-authenticates before the session the broker granted ends).
    Thread-safe: kafka-python asks from its IO thread.
    """

    def __init__(self, path: str) -> None:
        super().__init__()
        self._path = path
        self._lock = threading.Lock()
        self._seen: tuple[int, int] | None = None
        self._token = ""

    def token(self) -> str:
        with self._lock:
            try:
                stat = os.stat(self._path)
            except OSError as exc:
                raise ConfigError(f"KAFKA_SASL_OAUTH_TOKEN_FILE={self._path}: cannot read it "
                                  f"({exc.strerror})") from None
            if (stat.st_mtime_ns, stat.st_size) != self._seen:
                self._token = read_secret_file(self._path, "KAFKA_SASL_OAUTH_TOKEN_FILE").strip()
                self._seen = (stat.st_mtime_ns, stat.st_size)
            return self._token


class Unprinted(str):
    """A secret that is itself to the client but prints as ``'***'`` inside a container: kafka-python's admin
    client logs its whole configuration at debug ("Starting KafkaAdminClient with configuration: ...")."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "'***'"


# kafka-python doubles the wait between reconnects up to 30 s by default: after a 15 s broker outage a
# producer came back up to 30 s after the broker did, its replies unacknowledged meanwhile, and the group
# moved its partitions (chaos scenario c). Retrying every second at most is cheap for a broker.
RECONNECT_BACKOFF_MAX_MS = 1_000


def client_config(bootstrap_servers: str, security: KafkaSecurity = PLAINTEXT) -> dict[str, Any]:
    """kafka-python options for the brokers at ``bootstrap_servers`` (host:port[,host:port]) with ``security``.

    Reads the password file now. Raises ConfigError when it cannot be read.
    """
    config: dict[str, Any] = {"bootstrap_servers": bootstrap_servers.split(","),
                              "security_protocol": security.protocol,
                              "reconnect_backoff_max_ms": RECONNECT_BACKOFF_MAX_MS}
    if security.uses_ssl:
        config.update(ssl_check_hostname=security.ssl_check_hostname, ssl_cafile=security.ssl_cafile or None,
                      ssl_certfile=security.ssl_certfile or None, ssl_keyfile=security.ssl_keyfile or None)
    if security.uses_sasl:
        config["sasl_mechanism"] = security.sasl_mechanism
        if security.sasl_mechanism == "OAUTHBEARER":
            config["sasl_oauth_token_provider"] = FileTokenProvider(security.sasl_oauth_token_file)
        else:
            config.update(sasl_plain_username=security.sasl_username,
                          sasl_plain_password=Unprinted(security.password()))
    return config
