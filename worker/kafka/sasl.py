"""The client side of the SASL mechanisms the worker offers (worker/core/security.py's MECHANISMS), without a
client library: what the preflight (worker/kafka/preflight.py) authenticates with, whichever client follows.

PLAIN (RFC 4616) and OAUTHBEARER (RFC 7628) send one message; SCRAM-SHA-256
and SCRAM-SHA-512 (RFC 5802, RFC 7677) send two and check the server's
signature, so that a broker that does not know the password cannot pass for
one that does. The clients then authenticate with their own mechanisms, from
the same settings: the messages are the protocol's, not a client's.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from typing import Protocol

from worker.core.security import KafkaSecurity
from worker.kafka.tokens import TokenFile

SCRAM_HASHES = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
GS2_HEADER = b"n,,"  # no channel binding, no authorization identity
KVSEP = b"\x01"  # OAUTHBEARER's separator; alone, the client's acknowledgement of an error challenge (RFC 7628)


class Mechanism(Protocol):
    """One SASL exchange, client side: ``message`` until ``done``, each answer given to ``receive``."""

    @property
    def done(self) -> bool: ...
    @property
    def authenticated(self) -> bool: ...
    def message(self) -> bytes: ...
    def receive(self, challenge: bytes) -> None:
        """The server's answer to the last message. Raises ValueError when it is not what the mechanism allows
        (a SCRAM nonce or signature that does not verify)."""


def mechanism(security: KafkaSecurity) -> Mechanism:
    """The exchange for ``security.sasl_mechanism``. Reads the password or token file now; raises ConfigError
    when it cannot be read."""
    name = security.sasl_mechanism
    if name == "OAUTHBEARER":
        token = TokenFile(security.sasl_oauth_token_file).token()
        return OneMessage(GS2_HEADER + KVSEP + b"auth=Bearer " + token.encode() + KVSEP + KVSEP)
    if name in SCRAM_HASHES:
        return Scram(SCRAM_HASHES[name], security.sasl_username, security.password())
    return OneMessage(b"\x00" + security.sasl_username.encode() + b"\x00" + security.password().encode())


class OneMessage:
    """PLAIN and OAUTHBEARER: one message; a broker that accepts it answers with an empty challenge.

    An OAUTHBEARER broker that refuses the token answers with an error challenge instead (RFC 7628, 3.2.2: a
    JSON status), which the client acknowledges with a lone 0x01 for the broker to end the exchange with
    its error; the exchange then ends unauthenticated, whatever the broker answers.
    """

    def __init__(self, message: bytes) -> None:
        self._message = message
        self._refused = False
        self.done = self.authenticated = False

    def message(self) -> bytes:
        return self._message

    def receive(self, challenge: bytes) -> None:
        if challenge and not self._refused:
            self._refused, self._message = True, KVSEP
            return
        self.done = True
        self.authenticated = not self._refused


class Scram:
    """SCRAM's client: the first message, the proof of the password, then the server's signature checked."""

    def __init__(self, hash_name: str, user: str, password: str, nonce: str | None = None) -> None:
        self._hash = hash_name
        self._password = password.encode()
        self._nonce = nonce or secrets.token_urlsafe(18)
        saslname = user.replace("=", "=3D").replace(",", "=2C")
        self._client_first_bare = f"n={saslname},r={self._nonce}".encode()
        self._next = GS2_HEADER + self._client_first_bare
        self._server_signature: bytes | None = None
        self.done = self.authenticated = False

    def message(self) -> bytes:
        return self._next

    def receive(self, challenge: bytes) -> None:
        if self._server_signature is None:
            self._next = self._final_message(challenge)
            return
        fields = _fields(challenge)
        self.done = True
        if "e" in fields:
            raise ValueError(f"the server said {fields['e']!r}")
        if not hmac.compare_digest(base64.b64decode(fields.get("v", "")), self._server_signature):
            raise ValueError("the server's signature does not verify: it does not know the password")
        self.authenticated = True

    def _final_message(self, server_first: bytes) -> bytes:
        fields = _fields(server_first)
        nonce = fields.get("r", "")
        if not nonce.startswith(self._nonce) or len(nonce) == len(self._nonce):
            raise ValueError("the server's nonce does not extend the client's")
        try:
            salt, iterations = base64.b64decode(fields["s"]), int(fields["i"])
        except (KeyError, ValueError):  # binascii.Error is a ValueError
            raise ValueError(f"the server's first message lacks a salt or an iteration count: {fields}") from None
        salted = hashlib.pbkdf2_hmac(self._hash, self._password, salt, iterations)
        client_key = self._hmac(salted, b"Client Key")
        final_bare = b"c=" + base64.b64encode(GS2_HEADER) + b",r=" + nonce.encode()
        auth_message = self._client_first_bare + b"," + server_first + b"," + final_bare
        client_signature = self._hmac(hashlib.new(self._hash, client_key).digest(), auth_message)
        proof = bytes(a ^ b for a, b in zip(client_key, client_signature, strict=True))
        self._server_signature = self._hmac(self._hmac(salted, b"Server Key"), auth_message)
        return final_bare + b",p=" + base64.b64encode(proof)

    def _hmac(self, key: bytes, message: bytes) -> bytes:
        return hmac.new(key, message, self._hash).digest()


def _fields(message: bytes) -> dict[str, str]:
    """A SCRAM message's attributes (``r=...,s=...,i=...``); raises ValueError for one that is not."""
    try:
        return dict(part.split("=", 1) for part in message.decode().split(","))
    except (UnicodeDecodeError, ValueError):
        raise ValueError(f"not a SCRAM message: {message[:80]!r}") from None
