"""Why a TLS connection failed, said so that a person knows which setting to check.

Shared by the start-up checks of Kafka (worker/kafka/preflight.py) and Redis
(worker/dedup/redis_store.py). Pure: it reads the exception, nothing else.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass

# OpenSSL's X509_V_ERR_* codes, grouped by what the user has to change.
_UNTRUSTED = {2, 18, 19, 20, 21}     # issuer unknown, self-signed, chain not to a trusted root
_EXPIRED = {9, 10}                   # not yet valid, expired
_NAME_MISMATCH = {62, 64}            # hostname, IP address
# Alerts the server sends when it does not take (or did not get) our certificate.
_CLIENT_CERT_ALERTS = {"TLSV13_ALERT_CERTIFICATE_REQUIRED", "SSLV3_ALERT_BAD_CERTIFICATE", "TLSV1_ALERT_UNKNOWN_CA",
                       "SSLV3_ALERT_CERTIFICATE_UNKNOWN", "SSLV3_ALERT_CERTIFICATE_EXPIRED",
                       "SSLV3_ALERT_CERTIFICATE_REVOKED", "TLSV1_ALERT_ACCESS_DENIED"}
# What OpenSSL says when the other end answers in something that is not TLS.
_NOT_TLS = {"WRONG_VERSION_NUMBER", "RECORD_LAYER_FAILURE", "PACKET_LENGTH_TOO_LONG", "HTTP_REQUEST"}


@dataclass(frozen=True)
class TlsPeer:
    """The names a message needs: who we connected to, and the settings that decide how."""

    what: str               # "the Kafka broker at 127.0.0.1:9093"
    cafile_setting: str     # "KAFKA_SSL_CAFILE"
    cafile: str             # its value, "" for the system's CAs
    hostname_setting: str   # where hostname checking is turned off, "" where it cannot be
    client_cert_settings: str
    protocol_setting: str   # where TLS is asked for


def explain_tls_failure(exc: ssl.SSLError, peer: TlsPeer) -> str:
    """One sentence: what failed, why, and which setting to check."""
    if isinstance(exc, ssl.SSLCertVerificationError):
        code = exc.verify_code
        detail = exc.verify_message
        signers = (f"no CA of {peer.cafile_setting}={peer.cafile}" if peer.cafile
                   else f"none of the system's CAs ({peer.cafile_setting} is unset)")
        if code in _NAME_MISMATCH:
            off = f" ({peer.hostname_setting}=false turns the check off: never in production)" \
                if peer.hostname_setting else ""
            return (f"TLS hostname mismatch: the certificate of {peer.what} is not valid for the name connected to "
                    f"({detail}): connect by a name the certificate lists (see its subjectAltName){off}")
        if code in _EXPIRED:
            return f"the certificate of {peer.what} is not valid now ({detail}): the server's needs renewing"
        if code in _UNTRUSTED:
            return (f"untrusted certificate: {peer.what} presented a certificate that {signers} signed "
                    f"({detail}): point {peer.cafile_setting} at the CA that issued the server's certificate")
        return f"the certificate of {peer.what} was refused ({detail}): check {peer.cafile_setting}"
    reason = exc.reason or ""
    if reason in _CLIENT_CERT_ALERTS:
        return (f"{peer.what} refused this client's certificate ({reason.lower()}): it wants mutual TLS with a "
                f"certificate signed by a CA it trusts; check {peer.client_cert_settings}")
    if isinstance(exc, ssl.SSLEOFError) or reason == "UNEXPECTED_EOF_WHILE_READING":
        # Both close without a word: a plaintext port at the ClientHello, and (in TLS 1.3, whose alert may never
        # be read) a server that wants a client certificate this client did not show or that it does not trust.
        return (f"{peer.what} closed the connection during the TLS handshake ({reason.lower() or exc}): a "
                f"plaintext port does so, and so does a server that wants mutual TLS when this client shows no "
                f"certificate or one it does not trust; check the port and {peer.protocol_setting}, then "
                f"{peer.client_cert_settings}")
    if reason in _NOT_TLS:
        return (f"{peer.what} does not speak TLS ({reason.lower()}): it is a plaintext port, or "
                f"{peer.protocol_setting} asks for TLS where the server has none; check the port and "
                f"{peer.protocol_setting}")
    return (f"TLS with {peer.what} failed ({reason.lower() or exc}): check {peer.cafile_setting} and "
            f"{peer.protocol_setting}")


@dataclass(frozen=True)
class ClientPair:
    """A client certificate and key as settings name them: the files, and the variables that name them and the
    key's passphrase file (given or not)."""

    cert_file: str
    key_file: str
    cert_env: str
    key_env: str
    passphrase_env: str
    passphrase_given: bool


def unusable_pair(pair: ClientPair, exc: ssl.SSLError | OSError) -> str:
    """Why a certificate and key did not load, from the error and what the files hold: OpenSSL says only
    "PEM lib" for a file without a certificate, a missing key and an encrypted key alike."""
    if getattr(exc, "reason", None) == "KEY_VALUES_MISMATCH":
        return f"the key is not this certificate's: {pair.key_env} must be the private key it was made for"
    cert, key = _pem_text(pair.cert_file), _pem_text(pair.key_file or pair.cert_file)
    if "CERTIFICATE-----" not in cert:
        return f"{pair.cert_env} holds no PEM certificate (is it the key?)"
    if "PRIVATE KEY-----" not in key:
        return (f"{pair.key_env} holds no PEM private key" if pair.key_file else
                f"no PEM private key in {pair.cert_env}: set {pair.key_env} to the key's file")
    if "ENCRYPTED" in key:
        return (f"is {pair.passphrase_env} the key's passphrase?" if pair.passphrase_given else
                f"the key is encrypted: give its passphrase in {pair.passphrase_env}")
    return f"{getattr(exc, 'reason', None) or 'the key cannot be read'} ({exc})"


def _pem_text(path: str) -> str:
    try:
        with open(path, encoding="ascii", errors="replace") as file:
            return file.read(1 << 20)
    except OSError:
        return ""
