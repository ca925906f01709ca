"""Kafka client properties by their Java names, passed through to whichever client the worker runs on.

Users tune Kafka clients with the Apache Kafka names (``fetch.max.bytes``, ``linger.ms``, ``client.rack``).
``PROPERTIES`` is the one table of those the worker passes on: each with its kind, the roles it applies to
(the consumer of requests, the producer of replies and dead letters) and its name in each client library
(kafka-python's keyword, librdkafka's property), or None where that library has no equivalent. ``OWNED`` lists
the properties the worker sets itself, with the setting that does it. A property in neither table, one the
chosen client cannot take, or one the worker owns, is refused at start (ConfigError naming it).

Where they come from, each overriding the one before: the configuration file's ``[kafka.consumer]`` and
``[kafka.producer]`` tables, the variables ``STREAMSCORE_KAFKA_CONSUMER_<NAME>`` / ``STREAMSCORE_KAFKA_PRODUCER_<NAME>``
(the name upper-cased, dots as underscores: ``STREAMSCORE_KAFKA_CONSUMER_FETCH_MAX_BYTES``), and the flags
``--consumer-property NAME=VALUE`` / ``--producer-property NAME=VALUE`` (repeatable). docs/interop.md has the
table as users read it; a test keeps the two equal.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from worker.core.errors import ConfigError

Role = Literal["consumer", "producer"]
Client = Literal["kafka-python", "confluent"]
ROLES: tuple[Role, ...] = ("consumer", "producer")
ENV_PREFIXES: dict[Role, str] = {"consumer": "STREAMSCORE_KAFKA_CONSUMER_", "producer": "STREAMSCORE_KAFKA_PRODUCER_"}
FLAGS: dict[Role, str] = {"consumer": "--consumer-property", "producer": "--producer-property"}
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
ISOLATION_LEVELS = ("read_committed", "read_uncommitted")
# What the worker reads its requests with unless told otherwise: a request whose producer aborted its transaction
# was taken back, and must not be scored. Costs nothing where no producer uses transactions.
DEFAULT_ISOLATION = "read_committed"


@dataclass(frozen=True)
class Property:
    """One Kafka client property: its kind, the roles it applies to, its names in the two client libraries."""

    kind: type
    roles: tuple[Role, ...]
    kafka_python: str | None
    librdkafka: str | None
    choices: tuple[str, ...] = ()


_BOTH: tuple[Role, ...] = ROLES
_CONSUMER: tuple[Role, ...] = ("consumer",)
_PRODUCER: tuple[Role, ...] = ("producer",)

PROPERTIES: dict[str, Property] = {
    # The consumer of requests.
    "fetch.min.bytes": Property(int, _CONSUMER, "fetch_min_bytes", "fetch.min.bytes"),
    "fetch.max.bytes": Property(int, _CONSUMER, "fetch_max_bytes", "fetch.max.bytes"),
    "fetch.max.wait.ms": Property(int, _CONSUMER, "fetch_max_wait_ms", "fetch.wait.max.ms"),
    "max.partition.fetch.bytes": Property(int, _CONSUMER, "max_partition_fetch_bytes", "max.partition.fetch.bytes"),
    "isolation.level": Property(str, _CONSUMER, "isolation_level", "isolation.level", ISOLATION_LEVELS),
    "check.crcs": Property(bool, _CONSUMER, "check_crcs", "check.crcs"),
    "client.rack": Property(str, _CONSUMER, "client_rack", "client.rack"),
    # The producer of replies and dead letters.
    "linger.ms": Property(int, _PRODUCER, "linger_ms", "linger.ms"),
    "batch.size": Property(int, _PRODUCER, "batch_size", "batch.size"),
    "compression.type": Property(str, _PRODUCER, "compression_type", "compression.type", CODECS),
    "max.request.size": Property(int, _PRODUCER, "max_request_size", "message.max.bytes"),
    "delivery.timeout.ms": Property(int, _PRODUCER, "delivery_timeout_ms", "delivery.timeout.ms"),
    "retries": Property(int, _PRODUCER, "retries", "retries"),
    "transaction.timeout.ms": Property(int, _PRODUCER, "transaction_timeout_ms", "transaction.timeout.ms"),
    # Both.
    "request.timeout.ms": Property(int, _BOTH, "request_timeout_ms", None),  # librdkafka: producer only, below
    "metadata.max.age.ms": Property(int, _BOTH, "metadata_max_age_ms", "metadata.max.age.ms"),
    "retry.backoff.ms": Property(int, _BOTH, "retry_backoff_ms", "retry.backoff.ms"),
    "reconnect.backoff.ms": Property(int, _BOTH, "reconnect_backoff_ms", "reconnect.backoff.ms"),
    "reconnect.backoff.max.ms": Property(int, _BOTH, "reconnect_backoff_max_ms", "reconnect.backoff.max.ms"),
    "connections.max.idle.ms": Property(int, _BOTH, "connections_max_idle_ms", "connections.max.idle.ms"),
    "send.buffer.bytes": Property(int, _BOTH, "send_buffer_bytes", "socket.send.buffer.bytes"),
    "receive.buffer.bytes": Property(int, _BOTH, "receive_buffer_bytes", "socket.receive.buffer.bytes"),
    "socket.connection.setup.timeout.ms": Property(int, _BOTH, None, "socket.connection.setup.timeout.ms"),
    "client.dns.lookup": Property(str, _BOTH, "client_dns_lookup", "client.dns.lookup",
                                  ("use_all_dns_ips", "resolve_canonical_bootstrap_servers_only")),
    "max.in.flight.requests.per.connection": Property(int, _BOTH, "max_in_flight_requests_per_connection",
                                                      "max.in.flight.requests.per.connection"),
}
# librdkafka names request.timeout.ms a producer property only (the consumer's is socket.timeout.ms).
_LIBRDKAFKA_BY_ROLE: dict[tuple[str, Role], str] = {("request.timeout.ms", "producer"): "request.timeout.ms"}

# The properties the worker sets itself, and what sets them instead.
OWNED: dict[str, str] = {
    "bootstrap.servers": "--bootstrap-servers (KAFKA_BOOTSTRAP_SERVERS)",
    "client.id": "--client-id",
    "group.id": "--group",
    "group.protocol": "--kafka-group-protocol",
    "group.instance.id": "--group-instance-id",
    "partition.assignment.strategy": "--assignor",
    "session.timeout.ms": "--session-timeout-ms",
    "heartbeat.interval.ms": "nothing: the worker keeps the client's default, a third of the session timeout or less",
    "max.poll.records": "--max-poll-records",
    "max.poll.interval.ms": "--max-poll-interval-ms",
    "auto.offset.reset": "--auto-offset-reset",
    "enable.auto.commit": "nothing: the worker commits only what it has answered",
    "auto.commit.interval.ms": "nothing: the worker commits only what it has answered (--commit-interval-ms)",
    "enable.auto.offset.store": "nothing: the worker commits only what it has answered",
    "allow.auto.create.topics": "nothing: the worker never creates a topic by using it",
    "key.deserializer": "nothing: requests are read as bytes (the wire contract, docs/formats.md)",
    "value.deserializer": "nothing: requests are read as bytes (--request-format)",
    "key.serializer": "nothing: replies are written as bytes",
    "value.serializer": "nothing: replies are written as bytes (--reply-format)",
    "acks": "nothing: a reply counts once every in-sync replica has it (acks=all), or offsets could pass a lost reply",
    "enable.idempotence": "nothing: the reply producer is idempotent, so that retries never duplicate a reply",
    "transactional.id": "--transactional-id",
    "max.block.ms": "--liveness-timeout-s, from which the worker derives it",
    "security.protocol": "KAFKA_SECURITY_PROTOCOL (--kafka-security-protocol)",
}
_OWNED_PREFIXES = {"sasl.": "the KAFKA_SASL_* settings (docs/security.md)",
                   "ssl.": "the KAFKA_SSL_* settings (docs/security.md)"}


@dataclass(frozen=True)
class KafkaProperties:
    """The consumer's and the producer's properties by Java name, as given (strings), in the order given."""

    consumer: tuple[tuple[str, str], ...] = field(default=(), metadata={
        "flag": FLAGS["consumer"], "env": ENV_PREFIXES["consumer"] + "<NAME>",
        "help": "a property of the consumer of requests by its Java name, NAME=VALUE (fetch.max.bytes=1048576); "
                "in --config, a [kafka.consumer] table; the passed-through and refused ones: docs/interop.md"})
    producer: tuple[tuple[str, str], ...] = field(default=(), metadata={
        "flag": FLAGS["producer"], "env": ENV_PREFIXES["producer"] + "<NAME>",
        "help": "a property of the producer of replies and dead letters by its Java name, NAME=VALUE (linger.ms=5); "
                "in --config, a [kafka.producer] table"})

    def of(self, role: Role) -> dict[str, str]:
        """The properties of ``role`` ("consumer" or "producer") as a dict of Java name to value, as given."""
        return dict(self.consumer if role == "consumer" else self.producer)

    def value(self, role: Role, name: str) -> Any:
        """The typed value of ``name`` for ``role``, None when not given."""
        raw = self.of(role).get(name)
        return None if raw is None else _typed(role, name, raw)

    def overridden_by(self, other: KafkaProperties) -> KafkaProperties:
        """These properties with ``other``'s added, ``other`` winning where both name one."""
        return KafkaProperties(*(tuple({**self.of(role), **other.of(role)}.items()) for role in ROLES))

    def check(self, client: str) -> None:
        """Refuse a property that is owned, unknown, not of ``role``, of a bad value, or that ``client`` cannot
        take. Raises ConfigError naming it, where it was set and what to do."""
        for role in ROLES:
            for name, raw in self.of(role).items():
                prop = _known(role, name)
                if _client_name(prop, role, name, client) is None:
                    others = "kafka-python" if client == "confluent" else "confluent"
                    raise ConfigError(f"{_where(role)} {name}: {client} has no equivalent of this property; "
                                      f"remove it, or use --kafka-client {others}")
                _typed(role, name, raw)

    def for_client(self, role: Role, client: str) -> dict[str, Any]:
        """The properties of ``role`` under ``client``'s names, typed as it takes them (call ``check`` first).
        kafka-python's ``compression_type`` is None for none."""
        options: dict[str, Any] = {}
        for name in self.of(role):
            value = self.value(role, name)
            key = _client_name(PROPERTIES[name], role, name, client)
            if key is None:
                continue
            if client == "kafka-python" and name == "compression.type" and value == "none":
                value = None
            options[key] = value
        return options

    @classmethod
    def from_sources(cls, args: argparse.Namespace | None, environ: Mapping[str, str]) -> KafkaProperties:
        """The variables' properties, overridden by the flags' (``add_property_flags``)."""
        from_env: dict[Role, dict[str, str]] = {role: {} for role in ROLES}
        for variable, raw in environ.items():
            for role, prefix in ENV_PREFIXES.items():
                if variable.startswith(prefix) and len(variable) > len(prefix):
                    from_env[role][variable[len(prefix):].lower().replace("_", ".")] = raw
        from_flags: dict[Role, dict[str, str]] = {role: {} for role in ROLES}
        for role in ROLES:
            for pair in (getattr(args, f"{role}_properties", None) or []) if args is not None else []:
                name, equals, raw = pair.partition("=")
                if not equals or not name.strip():
                    raise ConfigError(f"{FLAGS[role]} {pair!r}: write NAME=VALUE, e.g. {FLAGS[role]} "
                                      f"{'fetch.max.bytes=1048576' if role == 'consumer' else 'linger.ms=5'}")
                from_flags[role][name.strip()] = raw.strip()
        env, flags = (cls(*(tuple(d[role].items()) for role in ROLES)) for d in (from_env, from_flags))
        return env.overridden_by(flags)

    @classmethod
    def from_tables(cls, path: str, table: Any) -> KafkaProperties:
        """The configuration file's ``[kafka]`` table: ``[kafka.consumer]`` and ``[kafka.producer]``, properties by
        Java name. Raises ConfigError naming the file and the key."""
        if not isinstance(table, dict) or not set(table) <= set(ROLES):
            raise ConfigError(f"{path}: [kafka] holds two tables only, [kafka.consumer] and [kafka.producer] "
                              "(client properties by their Java names, e.g. fetch.max.bytes = 1048576)")
        values: dict[Role, dict[str, str]] = {role: {} for role in ROLES}
        for role in ROLES:
            given = table.get(role, {})
            if not isinstance(given, dict):
                raise ConfigError(f"{path}: kafka.{role} must be a table ([kafka.{role}])")
            for name, value in _flattened(given):
                if isinstance(value, (dict, list)):
                    raise ConfigError(f"{path}: [kafka.{role}] {name} must be a number, a string or a boolean")
                values[role][name] = str(value).lower() if isinstance(value, bool) else str(value)
        return cls(*(tuple(values[role].items()) for role in ROLES))

    def __bool__(self) -> bool:
        return bool(self.consumer or self.producer)


WORKER_ROLES = "the consumer of requests and the producer of replies"


def add_property_flags(parser: argparse.ArgumentParser, roles: str = WORKER_ROLES, from_file: bool = True) -> None:
    """``--consumer-property`` and ``--producer-property``, repeatable; ``roles`` says what each client does,
    ``from_file`` whether a configuration file (--config) may set them too."""
    file = " Also [kafka.consumer] / [kafka.producer] in --config, and" if from_file else " Also"
    group = parser.add_argument_group(
        "Kafka client properties",
        f"Properties of {roles}, by their Apache Kafka (Java) names, passed to the chosen client under its own "
        "names; those streamscore sets itself are refused (docs/interop.md has the table)."
        f"{file} STREAMSCORE_KAFKA_CONSUMER_<NAME> / STREAMSCORE_KAFKA_PRODUCER_<NAME> (dots as underscores).")
    for role in ROLES:
        example = "fetch.max.bytes=1048576" if role == "consumer" else "linger.ms=5"
        group.add_argument(FLAGS[role], dest=f"{role}_properties", action="append", metavar="NAME=VALUE",
                           help=f"a {role} property, e.g. {example}; repeat for more")


def table_rows() -> list[tuple[str, str, str, str]]:
    """The passed-through properties as docs/interop.md shows them: Java name, roles, kafka-python, librdkafka."""
    rows = []
    for name, prop in PROPERTIES.items():
        names = {role: _client_name(prop, role, name, "confluent") or "—" for role in prop.roles}
        librdkafka = (next(iter(names.values())) if len(set(names.values())) == 1
                      else ", ".join(f"{role}: {found}" for role, found in names.items()))
        rows.append((name, ", ".join(prop.roles), prop.kafka_python or "—", librdkafka))
    return rows


def _flattened(table: Mapping[str, Any], prefix: str = "") -> Iterable[tuple[str, Any]]:
    """TOML reads ``fetch.max.bytes = 1`` as nested tables: put the dotted name back together."""
    for key, value in table.items():
        if isinstance(value, dict):
            yield from _flattened(value, f"{prefix}{key}.")
        else:
            yield f"{prefix}{key}", value


def _known(role: Role, name: str) -> Property:
    owner = OWNED.get(name) or next((why for prefix, why in _OWNED_PREFIXES.items() if name.startswith(prefix)), None)
    if owner is not None:
        raise ConfigError(f"{_where(role)} {name}: the worker sets this property itself; set {owner}")
    prop = PROPERTIES.get(name)
    if prop is None:
        raise ConfigError(f"{_where(role)} {name}: not a property the worker passes on; those it does: "
                          f"{', '.join(n for n, p in PROPERTIES.items() if role in p.roles)} (docs/interop.md)")
    if role not in prop.roles:
        other = "--consumer-property" if role == "producer" else "--producer-property"
        raise ConfigError(f"{_where(role)} {name} is not a {role} property: did you mean {other}?")
    return prop


def _client_name(prop: Property, role: Role, name: str, client: str) -> str | None:
    if client == "kafka-python":
        return prop.kafka_python
    return _LIBRDKAFKA_BY_ROLE.get((name, role), prop.librdkafka)


def _typed(role: Role, name: str, raw: str) -> Any:
    prop = PROPERTIES[name]
    if prop.choices and raw not in prop.choices:
        raise ConfigError(f"{_where(role)} {name}={raw!r}: must be one of {', '.join(prop.choices)}")
    if prop.kind is bool:
        if raw.lower() not in ("true", "false"):
            raise ConfigError(f"{_where(role)} {name}={raw!r}: must be true or false")
        return raw.lower() == "true"
    if prop.kind is int:
        try:
            number = int(raw)
        except ValueError:
            raise ConfigError(f"{_where(role)} {name}={raw!r}: must be a whole number") from None
        if number < 0:
            raise ConfigError(f"{_where(role)} {name}={number}: must be >= 0")
        return number
    return raw


def _where(role: Role) -> str:
    return f"Kafka {role} property ({FLAGS[role]}, [kafka.{role}], {ENV_PREFIXES[role]}*):"


__all__ = ["CODECS", "DEFAULT_ISOLATION", "ENV_PREFIXES", "OWNED", "PROPERTIES", "KafkaProperties", "Property",
           "add_property_flags", "table_rows"]
