"""OAUTHBEARER tokens from a file that something else keeps fresh (a sidecar, a CronJob, a CSI driver).

Client-free: kafka-python's token provider (worker/kafka/kafka_python/connection.py) and librdkafka's
``oauth_cb`` (``FileOAuthCallback``, set by worker/kafka/confluent/connection.py) both read through
``TokenFile``.
"""

from __future__ import annotations

import base64
import binascii
import os
import threading
import time
from collections.abc import Callable

import orjson

from worker.core.errors import ConfigError
from worker.core.security import read_secret_file

UNKNOWN_EXPIRY_S = 60.0  # a token whose expiry cannot be read is asked for again this soon


class TokenFile:
    """The token in a file, read again whenever its modification time or size changes, so that a refreshed
    token is used by the next authentication. Thread-safe: kafka-python asks from its IO thread.
    Raises ConfigError when the file cannot be read."""

    def __init__(self, path: str) -> None:
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


class FileOAuthCallback:
    """librdkafka's ``oauth_cb``: the token in the file (re-read when it changes), and when it expires.

    librdkafka calls it (from poll(), flush() or consume()) at start and again at 80 % of the lifetime
    returned, so the expiry comes from the token's own ``exp`` claim when it is a JWT; otherwise the file is
    asked again a minute later. Raises ConfigError when the file cannot be read.
    """

    def __init__(self, path: str, clock: Callable[[], float] = time.time) -> None:
        self._tokens = TokenFile(path)
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
