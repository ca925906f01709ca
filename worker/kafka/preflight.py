"""Before the clients: reach one bootstrap broker and authenticate the way they will, and say what failed.

kafka-python retries a refused TLS handshake or SASL exchange in the background
until its timeouts end, then reports only that no broker answered. So every
entry point, whichever client it then builds, first makes one connection of its
own, with the same TLS context and SASL mechanisms (worker/kafka/sasl.py), and
turns each way it can fail into a ConfigError naming the cause and the setting
to check: an untrusted CA, a hostname mismatch, a refused client certificate,
an unknown user, a wrong password, a refused token, TLS on a plaintext port or
the reverse, a listener that wants SASL. Each socket operation has a timeout.

The requests are the oldest versions Kafka 4 still serves: ApiVersions v0,
Metadata v4 (no topics), SaslHandshake v1, SaslAuthenticate v1.
"""

from __future__ import annotations

import socket
import ssl
import struct

from worker.core.errors import ConfigError, ServiceUnavailable
from worker.core.sections import DEFAULT_KAFKA_PORT, broker_address
from worker.core.security import KafkaSecurity
from worker.core.tls import ClientPair, TlsPeer, explain_tls_failure, unusable_pair
from worker.kafka.sasl import mechanism as sasl_mechanism

API_VERSIONS, METADATA, SASL_HANDSHAKE, SASL_AUTHENTICATE = 18, 3, 17, 36
UNSUPPORTED_SASL_MECHANISM = 33
MAX_RESPONSE_BYTES = 16 * 1024 * 1024
CLIENT_ID = b"streamscore-preflight"


class _Closed(Exception):
    """The broker closed the connection, or answered with something that is not a Kafka response."""


class _Wire:
    """Kafka requests over one socket, one at a time (request header v1, response header v0)."""

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock
        self._correlation = 0

    def request(self, api_key: int, version: int, body: bytes = b"") -> bytes:
        self._correlation += 1
        payload = struct.pack(">hhih", api_key, version, self._correlation, len(CLIENT_ID)) + CLIENT_ID + body
        self._sock.sendall(struct.pack(">i", len(payload)) + payload)
        (size,) = struct.unpack(">i", self._read(4))
        if not 4 <= size <= MAX_RESPONSE_BYTES:
            tls = size >> 24 in (0x15, 0x16)  # the first byte of a TLS alert or handshake record
            raise _Closed("it answered in TLS" if tls else f"it answered with a {size}-byte frame")
        data = self._read(size)
        if struct.unpack(">i", data[:4])[0] != self._correlation:
            raise _Closed("a response to another request")
        return data[4:]

    def _read(self, count: int) -> bytes:
        data = b""
        while len(data) < count:
            chunk = self._sock.recv(count - len(data))
            if not chunk:
                raise _Closed("the connection closed")
            data += chunk
        return data


def check_kafka(bootstrap_servers: str, security: KafkaSecurity, timeout_s: float = 10.0) -> None:
    """Connect to the first bootstrap broker that accepts a TCP connection, then check TLS and SASL.

    Blocks up to ``timeout_s`` per socket operation. Raises ServiceUnavailable when no broker
    accepts a connection or one does not answer, ConfigError when the security settings do not
    fit the broker (the message says how, and which setting to check).
    """
    refused = []
    for address in bootstrap_servers.split(","):
        host, port = broker_address(address) or (address.strip(), DEFAULT_KAFKA_PORT)  # settings checked it
        try:
            sock = socket.create_connection((host, port), timeout=timeout_s)
        except OSError as exc:
            refused.append(f"{address}: {getattr(exc, 'strerror', None) or exc}")
            continue
        with sock:
            _check_broker(sock, host, address, security)
        return
    raise ServiceUnavailable(f"no Kafka broker answers at KAFKA_BOOTSTRAP_SERVERS={bootstrap_servers} "
                             f"({'; '.join(refused)})")


def _check_broker(sock: socket.socket, host: str, address: str, security: KafkaSecurity) -> None:
    peer = TlsPeer(f"the Kafka broker at {address}", "KAFKA_SSL_CAFILE", security.ssl_cafile,
                   "KAFKA_SSL_CHECK_HOSTNAME", "KAFKA_SSL_CERTFILE and KAFKA_SSL_KEYFILE",
                   f"KAFKA_SECURITY_PROTOCOL={security.protocol}")
    try:
        if security.uses_ssl:
            sock = ssl_context(security).wrap_socket(sock, server_hostname=host)
        wire = _Wire(sock)
        # Under TLS 1.3 a refused client certificate shows only here, at the first read.
        _exchange(wire, API_VERSIONS, 0, peer.what, security)
        if security.uses_sasl:
            _authenticate(wire, security, address)
        else:
            _exchange(wire, METADATA, 4, peer.what, security, body=struct.pack(">i?", 0, False))
    except ssl.SSLError as exc:
        raise ConfigError(explain_tls_failure(exc, peer)) from None
    except TimeoutError:
        raise ServiceUnavailable(f"the Kafka broker at {address} accepted a connection but did not answer "
                                 f"({security.describe()}): is it a Kafka listener, and is "
                                 f"KAFKA_SECURITY_PROTOCOL={security.protocol} what it expects?") from None
    except OSError as exc:
        raise ServiceUnavailable(f"the Kafka broker at {address} dropped the connection ({exc})") from None


def _exchange(wire: _Wire, api_key: int, version: int, what: str, security: KafkaSecurity,
              body: bytes = b"") -> bytes:
    try:
        return wire.request(api_key, version, body)
    except _Closed as exc:
        if api_key == API_VERSIONS and not security.uses_ssl:
            raise ConfigError(f"{what} gave no Kafka answer to a plaintext request ({exc}): the port wants TLS; "
                              f"set KAFKA_SECURITY_PROTOCOL to SSL or SASL_SSL (it is {security.protocol})") from None
        if api_key == METADATA:
            raise ConfigError(f"{what} closed the connection when asked for metadata without authenticating: "
                              f"the listener wants SASL; set KAFKA_SECURITY_PROTOCOL=SASL_SSL (it is "
                              f"{security.protocol}), KAFKA_SASL_MECHANISM, KAFKA_SASL_USERNAME and "
                              "KAFKA_SASL_PASSWORD_FILE") from None
        raise ConfigError(f"{what} gave no Kafka answer ({exc}): check the port and "
                          f"KAFKA_SECURITY_PROTOCOL={security.protocol}") from None


def _authenticate(wire: _Wire, security: KafkaSecurity, address: str) -> None:
    """SaslHandshake, then SaslAuthenticate rounds driven by the mechanism (worker/kafka/sasl.py)."""
    what, mechanism_name = f"the Kafka broker at {address}", security.sasl_mechanism
    response = _exchange(wire, SASL_HANDSHAKE, 1, what, security, body=_string(mechanism_name))
    error_code, offered = _handshake_response(response)
    if error_code == UNSUPPORTED_SASL_MECHANISM:
        raise ConfigError(f"{what} does not offer KAFKA_SASL_MECHANISM={mechanism_name} on "
                          f"this listener; it offers {', '.join(offered) or 'none'}")
    if error_code:
        raise ConfigError(f"{what} refused the SASL handshake (error code {error_code})")
    mechanism = sasl_mechanism(security)
    step = 0
    while not mechanism.done:
        response = _exchange(wire, SASL_AUTHENTICATE, 1, what, security, body=_bytes(mechanism.message()))
        error_code, message, challenge = _authenticate_response(response)
        if error_code:
            raise ConfigError(_refusal(security, address, step, message))
        try:
            mechanism.receive(challenge)
        except ValueError as exc:  # a SCRAM nonce or signature that does not verify: not the broker we meant
            raise ConfigError(f"{what} failed SCRAM's server proof ({exc})") from None
        step += 1
    if not mechanism.authenticated:
        raise ConfigError(_refusal(security, address, step, "the exchange ended unauthenticated"))


def _refusal(security: KafkaSecurity, address: str, step: int, message: str) -> str:
    """Which credential was refused. A SCRAM server can refuse an unknown user only at the first
    round, before it has seen a proof of the password; PLAIN sends both at once and cannot tell."""
    mechanism, user = security.sasl_mechanism, security.sasl_username
    said = f" (the broker said: {message})" if message else ""
    where = f"Kafka authentication failed at {address}"
    if mechanism == "OAUTHBEARER":
        return (f"{where}: the broker refused the OAUTHBEARER token in KAFKA_SASL_OAUTH_TOKEN_FILE="
                f"{security.sasl_oauth_token_file}{said}: check that it is current and issued for this cluster")
    password_setting = "KAFKA_SASL_PASSWORD_FILE" if security.sasl_password_file else "KAFKA_SASL_PASSWORD"
    if mechanism.startswith("SCRAM") and step == 0:
        return (f"{where}: unknown user {user!r}: the broker has no {mechanism} credentials for it{said}; check "
                f"KAFKA_SASL_USERNAME, and KAFKA_SASL_MECHANISM (the user may exist for another SCRAM mechanism)")
    if mechanism.startswith("SCRAM"):
        return f"{where}: wrong password for user {user!r} ({mechanism}){said}; check {password_setting}"
    return (f"{where}: wrong password or unknown user {user!r} ({mechanism} cannot tell which){said}; check "
            f"KAFKA_SASL_USERNAME and {password_setting}")


def ssl_context(security: KafkaSecurity) -> ssl.SSLContext:
    """The TLS context kafka-python builds from the same settings. Raises ConfigError for unusable files."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.check_hostname = security.ssl_check_hostname  # the chain is verified either way
    try:
        if security.ssl_cafile:
            context.load_verify_locations(security.ssl_cafile)
        else:
            context.load_default_certs()
    except ssl.SSLError as exc:
        raise ConfigError(f"KAFKA_SSL_CAFILE={security.ssl_cafile} holds no usable PEM certificate ({exc.reason})") \
            from None
    if security.ssl_certfile:
        try:
            # Without a passphrase file, an encrypted key is refused, not asked for on the terminal.
            context.load_cert_chain(security.ssl_certfile, security.ssl_keyfile or None,
                                    security.key_password() or (lambda: ""))
        except ssl.SSLError as exc:
            pair = ClientPair(security.ssl_certfile, security.ssl_keyfile, "KAFKA_SSL_CERTFILE", "KAFKA_SSL_KEYFILE",
                              "KAFKA_SSL_KEY_PASSWORD_FILE", bool(security.ssl_key_password_file))
            raise ConfigError(f"KAFKA_SSL_CERTFILE={security.ssl_certfile} and KAFKA_SSL_KEYFILE="
                              f"{security.ssl_keyfile or '(none: key in the certificate file)'} are not a usable "
                              f"certificate and key pair: {unusable_pair(pair, exc)}") from None
    return context


def _string(text: str) -> bytes:
    raw = text.encode()
    return struct.pack(">h", len(raw)) + raw


def _bytes(raw: bytes) -> bytes:
    return struct.pack(">i", len(raw)) + raw


def _handshake_response(data: bytes) -> tuple[int, list[str]]:
    error_code, count = struct.unpack_from(">hi", data)
    offset, offered = 6, []
    for _ in range(max(count, 0)):
        (length,) = struct.unpack_from(">h", data, offset)
        offered.append(data[offset + 2:offset + 2 + length].decode())
        offset += 2 + length
    return error_code, offered


def _authenticate_response(data: bytes) -> tuple[int, str, bytes]:
    error_code, length = struct.unpack_from(">hh", data)
    offset = 4 + max(length, 0)
    message = data[4:offset].decode(errors="replace") if length > 0 else ""
    (size,) = struct.unpack_from(">i", data, offset)
    return error_code, message, data[offset + 4:offset + 4 + max(size, 0)]
