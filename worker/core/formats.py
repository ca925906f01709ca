"""How request records are framed, and where their schemas are: the request-format settings.

The formats section of ``Settings`` (a group that names its own variables and
flags, as KafkaSecurity does), shared by the worker and the producer side.
``json`` is the wire contract's own JSON (worker/core/wire.py); ``avro``,
``protobuf`` and ``json-schema`` are records in the Confluent wire format, with
their schema in a schema registry (docs/formats.md). The format may differ per
requests topic: ``json,orders=avro`` reads ``orders`` as Avro, the others as
JSON. Each setting is a flag and an environment variable; the registry's
follow the conventional ``SCHEMA_REGISTRY_*`` names. The flag wins.

Pure apart from checking that the named files exist: the registry client
(worker/formats/registry_client.py) reads the password file when it connects.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

from worker.core import registry
from worker.core.errors import ConfigError
from worker.core.registry import Group, setting

REQUEST_FORMATS = ("json", "avro", "protobuf", "json-schema")
SUBJECT_STRATEGIES = ("topic", "record", "topic-record")
SCHEMA_MODES = ("register", "lookup")
# The request fields a schema may call otherwise (--request-fields id=requestId,inputs=features).
REQUEST_FIELDS = ("id", "inputs", "reply_to", "deadline_ms")


@dataclass(frozen=True)
class Formats:
    """The request format and the schema registry (docs/formats.md).

    Each field is a setting of the section ``formats`` of docs/configuration.md, which gives its variable, flag,
    default and meaning; ``from_sources()`` reads them as the worker does. Raises ConfigError when inconsistent;
    never shows a secret (it holds the password's file name only)."""

    request_format: str = setting(
        "json", "how request values are written: json (the wire contract's JSON), avro, protobuf or json-schema "
        "(Confluent wire format: magic byte 0, a 4-byte schema id, the payload; the schema is fetched from "
        "SCHEMA_REGISTRY_URL by id); per requests topic as TOPIC=FORMAT items after the default, e.g. "
        "json,orders=avro. See docs/formats.md")
    reply_format: str = setting(
        "json", "how reply values are written: json (the wire contract's JSON), avro, protobuf or json-schema "
        "(Confluent wire format, a schema per model made from its outputs and registered at start). See "
        "docs/formats.md")
    subject_strategy: str = setting(
        "topic", "the subject a schema is registered (or looked up) under, the worker's reply schemas and the "
        "producer side's request schemas alike: topic (<topic>-value; one schema per topic, so one model per reply "
        "topic), record (the record's name, streamscore.ChurnReply) or topic-record (<topic>-<record name>)")
    reply_schema_mode: str = setting(
        "register", "register the reply schemas at start, or lookup: only find them registered already (read-only "
        "registry credentials)")
    request_fields: str = setting(
        "", "registry-framed requests: the schema's names for the request fields, e.g. "
        "id=requestId,inputs=features (default: id, inputs, reply_to, deadline_ms as they are)")
    registry_url: str = setting(
        "", "the schema registry's Confluent-compatible API, e.g. http://127.0.0.1:18081/apis/ccompat/v7 (`make up` "
        "prints the local one); needed by avro, protobuf and json-schema", env="SCHEMA_REGISTRY_URL")
    registry_user: str = setting("", "basic auth user towards the registry", env="SCHEMA_REGISTRY_USER")
    registry_password_file: str = setting(
        "", "file holding the basic auth password (a mounted secret), read when the registry client starts, a "
        "trailing newline ignored", env="SCHEMA_REGISTRY_PASSWORD_FILE", path=True)
    registry_ca_file: str = setting(
        "", "https:// registry: PEM file of the CA that signed its certificate (default: the system's trusted CAs)",
        env="SCHEMA_REGISTRY_CA_FILE", path=True)
    registry_timeout_ms: int = setting(
        2000, "longest wait for one registry call; a registry that does not answer pauses consumption, as a Redis "
        "outage does, until it does", env="SCHEMA_REGISTRY_TIMEOUT_MS")
    registry_cache_size: int = setting(1000, "schemas kept by id (least recently used dropped first)",
                                       env="SCHEMA_REGISTRY_CACHE_SIZE")
    unknown_schema_retries: int = setting(
        3, "a schema id the registry does not know is asked again this many times (backing off, 0.5 s doubling) "
        "before its records are dead-lettered unknown_schema", env="SCHEMA_REGISTRY_UNKNOWN_ID_RETRIES")

    def __post_init__(self) -> None:
        object.__setattr__(self, "request_format", self.request_format.lower())
        object.__setattr__(self, "reply_format", self.reply_format.lower())
        _validate(self)

    @property
    def framed(self) -> bool:
        """Some requests are registry-framed (not the wire contract's JSON)."""
        return any(name != "json" for name in self.used())

    def format_of(self, topic: str) -> str:
        """The format of ``topic``'s requests."""
        default, per_topic = _split(self.request_format)
        return per_topic.get(topic, default)

    def used(self) -> frozenset[str]:
        """The formats read: the default's and each named topic's."""
        default, per_topic = _split(self.request_format)
        return frozenset((default, *per_topic.values()))

    def named_topics(self) -> frozenset[str]:
        """The topics given a format of their own."""
        return frozenset(_split(self.request_format)[1])

    def field_names(self) -> dict[str, str]:
        """The request field -> the schema's name for it, for the renamed ones only."""
        pairs = [item.split("=", 1) for item in self.request_fields.split(",") if item.strip()]
        return {ours.strip(): theirs.strip() for ours, theirs in pairs}

    @classmethod
    def from_sources(cls, args: argparse.Namespace | None = None,
                     environ: Mapping[str, str] | None = None) -> Formats:
        """Defaults, overridden by environment variables, overridden by flags (``add_format_flags``); the worker
        reads a configuration file's values under them too (``Settings.from_sources``)."""
        environ = os.environ if environ is None else environ
        settings = registry.declared(FORMATS)
        registry.refuse_unknown(environ, settings)
        given = {**registry.from_environment(settings, environ), **registry.from_arguments(settings, args)}
        return cls(**registry.by_group(settings, given).get(cls, {}))


def add_format_flags(parser: argparse.ArgumentParser, leave_out: tuple[str, ...] = ()) -> None:
    """One flag per setting (``--request-format``, ``--schema-registry-url``, ...) but those named in
    ``leave_out`` (a producer command's, which has no use for the worker's own); defaults stay None."""
    registry.add_flags(parser, [s for s in registry.declared(FORMATS) if s.key not in leave_out])


def _split(spec: str) -> tuple[str, dict[str, str]]:
    """``json,orders=avro`` -> ("json", {"orders": "avro"}); the default is json when only topics are named."""
    default, per_topic = "json", {}
    for item in filter(None, (part.strip() for part in spec.split(","))):
        topic, equals, name = item.rpartition("=")
        if equals:
            per_topic[topic.strip()] = name.strip()
        else:
            default = name
    return default, per_topic


def _validate(s: Formats) -> None:
    def need(condition: bool, message: str) -> None:
        if not condition:
            raise ConfigError(message)

    items = [item.strip() for item in s.request_format.split(",")]
    need(all(items) and sum("=" not in item for item in items) <= 1,
         f"request_format (--request-format, STREAMSCORE_REQUEST_FORMAT) is a format, optionally followed by "
         f"TOPIC=FORMAT items (json,orders=avro), got {s.request_format!r}")
    for name in s.used():
        need(name in REQUEST_FORMATS, f"request_format (--request-format, STREAMSCORE_REQUEST_FORMAT): each format "
             f"must be one of {', '.join(REQUEST_FORMATS)}, got {name!r} in {s.request_format!r}")
    need(all(s.named_topics()), f"request_format: a TOPIC=FORMAT item names no topic in {s.request_format!r}")
    need(not s.framed or bool(s.registry_url), f"--request-format {s.request_format} reads the schemas from a "
         "registry: set SCHEMA_REGISTRY_URL (or --schema-registry-url); `make up` prints the local one")
    need(s.reply_format in REQUEST_FORMATS, f"reply_format (--reply-format, STREAMSCORE_REPLY_FORMAT) must be one "
         f"of {', '.join(REQUEST_FORMATS)}, got {s.reply_format!r}")
    need(s.reply_format == "json" or bool(s.registry_url), f"--reply-format {s.reply_format} registers the reply "
         "schemas in a registry: set SCHEMA_REGISTRY_URL (or --schema-registry-url); `make up` prints the local one")
    need(s.subject_strategy in SUBJECT_STRATEGIES, f"subject_strategy (--subject-strategy, "
         f"STREAMSCORE_SUBJECT_STRATEGY) must be one of {', '.join(SUBJECT_STRATEGIES)}, "
         f"got {s.subject_strategy!r}")
    need(s.reply_schema_mode in SCHEMA_MODES, f"reply_schema_mode (--reply-schema-mode, STREAMSCORE_REPLY_SCHEMA_MODE)"
         f" must be one of {', '.join(SCHEMA_MODES)}, got {s.reply_schema_mode!r}")
    scheme = urlsplit(s.registry_url).scheme
    need(not s.registry_url or scheme in ("http", "https"),
         f"SCHEMA_REGISTRY_URL must start with http:// or https://, got {s.registry_url!r}")
    need(not s.registry_ca_file or scheme == "https",
         "SCHEMA_REGISTRY_CA_FILE is set, but SCHEMA_REGISTRY_URL is not https://: use https, or unset it")
    need(bool(s.registry_user) == bool(s.registry_password_file),
         "basic auth needs both SCHEMA_REGISTRY_USER and SCHEMA_REGISTRY_PASSWORD_FILE, or neither")
    for env, path in (("SCHEMA_REGISTRY_PASSWORD_FILE", s.registry_password_file),
                      ("SCHEMA_REGISTRY_CA_FILE", s.registry_ca_file)):
        problem = registry.unusable_file(env, path)
        need(problem is None, problem or "")
    named = {setting.name: f"{setting.name} ({setting.flag}, {setting.env})" for setting in registry.declared(FORMATS)}
    for name, least in (("registry_timeout_ms", 1), ("registry_cache_size", 1), ("unknown_schema_retries", 0)):
        need(getattr(s, name) >= least, f"{named[name]} must be at least {least}, got {getattr(s, name)}")
    for item in filter(str.strip, s.request_fields.split(",")):
        ours, _, theirs = item.partition("=")
        need(ours.strip() in REQUEST_FIELDS and bool(theirs.strip()),
             f"STREAMSCORE_REQUEST_FIELDS: {item.strip()!r} must be FIELD=NAME, FIELD one of "
             f"{', '.join(REQUEST_FIELDS)}")


# The format settings as a group (worker/core/registry.py): keys at the top of the configuration file.
FORMATS = Group("formats", Formats, "request format and schema registry (docs/formats.md)",
                owns=("SCHEMA_REGISTRY_",))
JSON = Formats()
