"""How to reach a secured Kafka cluster: the security settings every Kafka client of the project takes.

One definition for the worker, the backfill, the producer CLI, the clients
and the bench: each setting is a flag and an environment variable with the
conventional name (``KAFKA_SECURITY_PROTOCOL``, ``KAFKA_SASL_MECHANISM``,
``KAFKA_SASL_USERNAME``, ``KAFKA_SASL_PASSWORD`` or ``KAFKA_SASL_PASSWORD_FILE``,
``KAFKA_SASL_OAUTH_TOKEN_FILE``, ``KAFKA_SSL_CAFILE``, ``KAFKA_SSL_CERTFILE``,
``KAFKA_SSL_KEYFILE``, ``KAFKA_SSL_CHECK_HOSTNAME``); the flag wins.

Pure apart from checking that the named files exist and reading a password
file: the Kafka adapters turn a KafkaSecurity into their library's options
(worker/kafka/kafka_python/connection.py). Passwords are held in a Secret, whose repr and
str never show them, so a KafkaSecurity can be logged as it is.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping
from dataclasses import dataclass

from worker.core import registry
from worker.core.errors import ConfigError
from worker.core.registry import Group, setting

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")


class Secret:
    """A password or token: compares and hashes by value, never shows it. ``reveal()`` gives it."""

    __slots__ = ("_value",)

    def __init__(self, value: str = "") -> None:
        self._value = value

    def reveal(self) -> str:
        return self._value

    def __bool__(self) -> bool:
        return bool(self._value)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Secret) and other._value == self._value

    def __hash__(self) -> int:
        return hash(self._value)

    def __repr__(self) -> str:
        return "Secret('***')" if self._value else "Secret('')"

    def __str__(self) -> str:
        return "***" if self._value else ""


@dataclass(frozen=True)
class KafkaSecurity:
    """Transport security and authentication towards the brokers: TLS, mutual TLS, SASL.

    The default is PLAINTEXT (no TLS, no authentication). Build one from the conventional environment variables
    with ``from_sources()``, or give the fields. ``repr`` and logs never show the password: it is held in a
    ``Secret``. Construction checks that the fields fit together and that the named files exist and are readable.

    Attributes:
        protocol: ``PLAINTEXT``, ``SSL`` (TLS; mutual TLS with a client certificate), ``SASL_PLAINTEXT`` or
            ``SASL_SSL`` (``KAFKA_SECURITY_PROTOCOL``); case does not matter.
        sasl_mechanism: With ``SASL_*``: ``PLAIN``, ``SCRAM-SHA-256``, ``SCRAM-SHA-512`` or ``OAUTHBEARER``
            (``KAFKA_SASL_MECHANISM``).
        sasl_username: The SASL user, for PLAIN and SCRAM (``KAFKA_SASL_USERNAME``).
        sasl_password: The SASL password, as a ``Secret`` (``KAFKA_SASL_PASSWORD``); prefer
            ``sasl_password_file``.
        sasl_password_file: A file holding the SASL password, read at start, a trailing newline ignored
            (``KAFKA_SASL_PASSWORD_FILE``).
        sasl_oauth_token_file: OAUTHBEARER: a file holding the access token (a JWT), read again whenever it
            changes (``KAFKA_SASL_OAUTH_TOKEN_FILE``).
        ssl_cafile: A PEM file of the CAs that signed the brokers' certificates; empty: the system's trusted CAs
            (``KAFKA_SSL_CAFILE``).
        ssl_certfile: Mutual TLS: this client's certificate, PEM (``KAFKA_SSL_CERTFILE``).
        ssl_keyfile: Mutual TLS: the certificate's private key, PEM (``KAFKA_SSL_KEYFILE``).
        ssl_key_password_file: Mutual TLS: a file holding the passphrase of an encrypted ``ssl_keyfile`` (or of
            the key in ``ssl_certfile``), read at start (``KAFKA_SSL_KEY_PASSWORD_FILE``).
        ssl_check_hostname: Check that each broker's certificate names the host connected to
            (``KAFKA_SSL_CHECK_HOSTNAME``); False only to diagnose, never in production.

    Raises:
        ConfigError: The fields do not fit together (SASL settings without a SASL protocol, a mechanism without
            its credentials, TLS files without TLS, a key without its certificate), or a named file does not
            exist or is not readable. The message names the variable to fix.
    """

    protocol: str = setting("PLAINTEXT", "PLAINTEXT, SSL (TLS; mutual TLS with a client certificate), "
                            "SASL_PLAINTEXT or SASL_SSL", env="KAFKA_SECURITY_PROTOCOL")
    sasl_mechanism: str = setting("", "with SASL_*: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER",
                                  env="KAFKA_SASL_MECHANISM")
    sasl_username: str = setting("", "SASL user (PLAIN and SCRAM)", env="KAFKA_SASL_USERNAME")
    sasl_password: Secret = setting(Secret, "SASL password; prefer KAFKA_SASL_PASSWORD_FILE (a flag's value shows "
                                    "in `ps`, a variable's in the process environment)", env="KAFKA_SASL_PASSWORD",
                                    secret=True)
    sasl_password_file: str = setting("", "file holding the SASL password (a mounted secret); read at start (a "
                                      "password the brokers refuse later stops the worker: its restart reads it "
                                      "again), a trailing newline ignored", env="KAFKA_SASL_PASSWORD_FILE",
                                      path=True)
    sasl_oauth_token_file: str = setting("", "OAUTHBEARER: file holding the access token (a JWT), read again "
                                         "whenever it changes (keep it fresh with your token refresher or sidecar)",
                                         env="KAFKA_SASL_OAUTH_TOKEN_FILE", path=True)
    ssl_cafile: str = setting("", "PEM file of the CA(s) that signed the brokers' certificates (default: the "
                              "system's trusted CAs)", env="KAFKA_SSL_CAFILE", path=True)
    ssl_certfile: str = setting("", "mutual TLS: this client's certificate (PEM)", env="KAFKA_SSL_CERTFILE",
                                path=True)
    ssl_keyfile: str = setting("", "mutual TLS: the certificate's private key (PEM; encrypted: give "
                               "KAFKA_SSL_KEY_PASSWORD_FILE too)", env="KAFKA_SSL_KEYFILE", path=True)
    ssl_key_password_file: str = setting("", "mutual TLS: file holding the passphrase of an encrypted private key "
                                         "(a mounted secret); read at start, a trailing newline ignored",
                                         env="KAFKA_SSL_KEY_PASSWORD_FILE", path=True)
    ssl_check_hostname: bool = setting(True, "check that each broker's certificate names the host connected to: "
                                       "true or false (false only to diagnose, never in production)",
                                       env="KAFKA_SSL_CHECK_HOSTNAME")

    def __post_init__(self) -> None:
        object.__setattr__(self, "protocol", self.protocol.upper())
        object.__setattr__(self, "sasl_mechanism", self.sasl_mechanism.upper())
        _validate(self)

    @property
    def uses_ssl(self) -> bool:
        """The connection is TLS: ``SSL`` or ``SASL_SSL``."""
        return self.protocol in ("SSL", "SASL_SSL")

    @property
    def uses_sasl(self) -> bool:
        """The client authenticates with SASL: ``SASL_PLAINTEXT`` or ``SASL_SSL``."""
        return self.protocol.startswith("SASL_")

    def password(self) -> str:
        """The SASL password: the file's content (read now: when the clients are built) or the value.

        Raises ConfigError naming KAFKA_SASL_PASSWORD_FILE when the file cannot be read or is empty.
        """
        if not self.sasl_password_file:
            return self.sasl_password.reveal()
        return read_secret_file(self.sasl_password_file, "KAFKA_SASL_PASSWORD_FILE")

    def key_password(self) -> str | None:
        """The passphrase of the client's private key, read from its file now; None: the key is not encrypted.

        Raises ConfigError naming KAFKA_SSL_KEY_PASSWORD_FILE when the file cannot be read or is empty.
        """
        if not self.ssl_key_password_file:
            return None
        return read_secret_file(self.ssl_key_password_file, "KAFKA_SSL_KEY_PASSWORD_FILE")

    def describe(self) -> str:
        """What this connects with, for messages and logs: never a secret."""
        if not self.uses_sasl:
            return self.protocol + (" with a client certificate" if self.ssl_certfile else "")
        who = f" as {self.sasl_username!r}" if self.sasl_username else ""
        return f"{self.protocol} with {self.sasl_mechanism}{who}"

    @classmethod
    def from_sources(cls, args: argparse.Namespace | None = None,
                     environ: Mapping[str, str] | None = None) -> KafkaSecurity:
        """Defaults, overridden by environment variables, overridden by flags (``add_security_flags``); the worker
        reads a configuration file's ``[kafka_security]`` table under them too (``Settings.from_sources``).

        Args:
            args: Parsed command-line flags (``--kafka-security-protocol``, ...); None: none.
            environ: The variables (None: this process's environment).

        Returns:
            The security settings.

        Raises:
            ConfigError: A ``KAFKA_SASL_*``, ``KAFKA_SSL_*`` or ``KAFKA_SECURITY_*`` variable is unknown (a typo),
                a value is malformed, or the settings do not fit together.
        """
        environ = os.environ if environ is None else environ
        settings = registry.declared(SECURITY)
        registry.refuse_unknown(environ, settings)
        given = {**registry.from_environment(settings, environ), **registry.from_arguments(settings, args)}
        return cls(**registry.by_group(settings, given).get(cls, {}))


def add_security_flags(parser: argparse.ArgumentParser) -> None:
    """One flag per setting, named after its variable (``--kafka-sasl-mechanism``); defaults stay None."""
    registry.add_flags(parser, registry.declared(SECURITY))


def read_secret_file(path: str, setting: str) -> str:
    """A secret from a file, without its trailing newline. Raises ConfigError naming ``setting``."""
    try:
        with open(path, encoding="utf-8") as file:
            value = file.read().rstrip("\r\n")
    except OSError as exc:
        raise ConfigError(f"{setting}={path}: cannot read it ({exc.strerror})") from None
    if not value:
        raise ConfigError(f"{setting}={path} is empty")
    return value


def _validate(s: KafkaSecurity) -> None:
    def need(condition: bool, message: str) -> None:
        if not condition:
            raise ConfigError(message)

    need(s.protocol in PROTOCOLS, f"KAFKA_SECURITY_PROTOCOL must be one of {', '.join(PROTOCOLS)}, got {s.protocol!r}")
    if not s.uses_sasl:
        set_sasl = [setting.env for setting in registry.declared(SECURITY)
                    if setting.name.startswith("sasl_") and getattr(s, setting.name)]
        need(not set_sasl, f"{', '.join(set_sasl)} set, but KAFKA_SECURITY_PROTOCOL={s.protocol} does not use "
             "SASL: use SASL_SSL (or SASL_PLAINTEXT), or unset them")
    else:
        need(s.sasl_mechanism in MECHANISMS, f"KAFKA_SECURITY_PROTOCOL={s.protocol} needs KAFKA_SASL_MECHANISM, one "
             f"of {', '.join(MECHANISMS)}; got {s.sasl_mechanism or 'nothing'!r}")
        if s.sasl_mechanism == "OAUTHBEARER":
            need(bool(s.sasl_oauth_token_file), "KAFKA_SASL_MECHANISM=OAUTHBEARER needs KAFKA_SASL_OAUTH_TOKEN_FILE "
                 "(the file your token refresher keeps the access token in)")
            need(not (s.sasl_username or s.sasl_password or s.sasl_password_file),
                 "KAFKA_SASL_MECHANISM=OAUTHBEARER authenticates with the token alone: unset KAFKA_SASL_USERNAME "
                 "and KAFKA_SASL_PASSWORD(_FILE)")
        else:
            need(bool(s.sasl_username), f"KAFKA_SASL_MECHANISM={s.sasl_mechanism} needs KAFKA_SASL_USERNAME")
            need(bool(s.sasl_password) != bool(s.sasl_password_file),
                 f"KAFKA_SASL_MECHANISM={s.sasl_mechanism} needs exactly one of KAFKA_SASL_PASSWORD_FILE (a mounted "
                 "secret, preferred) and KAFKA_SASL_PASSWORD")
            need(not s.sasl_oauth_token_file, "KAFKA_SASL_OAUTH_TOKEN_FILE is only used with "
                 "KAFKA_SASL_MECHANISM=OAUTHBEARER: unset it")
    if not s.uses_ssl:
        set_ssl = [setting.env for setting in registry.declared(SECURITY) if setting.name.startswith("ssl_")
                   and setting.name != "ssl_check_hostname" and getattr(s, setting.name)]
        need(not set_ssl, f"{', '.join(set_ssl)} set, but KAFKA_SECURITY_PROTOCOL={s.protocol} does not use TLS: "
             "use SSL or SASL_SSL, or unset them")
    need(not s.ssl_keyfile or bool(s.ssl_certfile),
         "KAFKA_SSL_KEYFILE is set without KAFKA_SSL_CERTFILE: mutual TLS needs the certificate too")
    need(not s.ssl_key_password_file or bool(s.ssl_certfile),
         "KAFKA_SSL_KEY_PASSWORD_FILE is set without KAFKA_SSL_CERTFILE: it unlocks the client certificate's key")
    for name in ("sasl_password_file", "sasl_oauth_token_file", "ssl_cafile", "ssl_certfile", "ssl_keyfile",
                 "ssl_key_password_file"):
        path = getattr(s, name)
        env = next(setting.env for setting in registry.declared(SECURITY) if setting.name == name)
        problem = registry.unusable_file(env, path)
        need(problem is None, problem or "")


# The Kafka security settings as a group (worker/core/registry.py): the configuration file's [kafka_security] table.
SECURITY = Group("kafka", KafkaSecurity, "Kafka security (TLS, SASL)", table="kafka_security",
                 owns=("KAFKA_SASL_", "KAFKA_SSL_", "KAFKA_SECURITY_"))
PLAINTEXT = KafkaSecurity()
