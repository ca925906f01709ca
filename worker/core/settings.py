"""All of the worker's configuration, from environment variables and flags, checked at start.

Each setting has a flag (``--max-batch-size``) and an environment variable
(``STREAMSCORE_MAX_BATCH_SIZE``); the flag wins. Those of the services follow the usual names:
``KAFKA_BOOTSTRAP_SERVERS``, the ``KAFKA_SECURITY_*``/``KAFKA_SASL_*``/``KAFKA_SSL_*`` of
worker/core/security.py, ``REDIS_URL``, ``REDIS_PASSWORD_FILE`` and ``REDIS_CA_FILE``. An unknown ``STREAMSCORE_*``
variable, a malformed value or a conflict between values is a ConfigError that
names the setting.

``Settings`` holds one section per concern (worker/core/sections.py: kafka, dedup, model, batching,
delivery, operations; and formats, worker/core/formats.py, the request format and the schema registry,
whose settings name their own variables and flags), and each part of the worker is given only the
sections it needs. Setting names stay flat and unique across sections (``max_batch_size``, never
``batching.max_batch_size``): they are what flags, variables and messages name. This module checks what
spans sections and reads the sources.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any, get_type_hints

from worker.core import registry
from worker.core.clients import KAFKA_CLIENTS, check_kafka_client
from worker.core.errors import ConfigError
from worker.core.formats import Formats
from worker.core.kafka_properties import ENV_PREFIXES, KafkaProperties, add_property_flags
from worker.core.model_table import ConfigFile, ModelTable, read_config_file
from worker.core.sections import (
    SECTIONS,
    SETTINGS,
    BatchingSettings,
    DedupSettings,
    DeliverySettings,
    KafkaSettings,
    ModelSettings,
    OperationsSettings,
    check_amp,
    redact_url,
    setting_names,
)
from worker.core.security import KafkaSecurity
from worker.core.transactional_ids import own_transactional_id

# Also importable from here, where a setting's check lives for every caller (the producer's --kafka-client too).
__all__ = ["KAFKA_CLIENTS", "TOOLING_ENV", "BatchingSettings", "DedupSettings", "DeliverySettings", "KafkaSettings",
           "ModelSettings", "OperationsSettings", "Settings", "add_flags", "check_amp", "check_kafka_client",
           "redact_url", "require_services", "setting_names"]

# Read by deploy/local/services.sh and deploy/venv.sh, not by the worker: not "unknown".
TOOLING_ENV = {"STREAMSCORE_STATE_DIR", "STREAMSCORE_CACHE_DIR"}
CONFIG_ENV = "STREAMSCORE_CONFIG"  # the configuration file (worker/core/model_table.py), as --config


@dataclass(frozen=True)
class Settings:
    """Every setting, in sections. Each section checks its own values when built; this checks what spans
    sections (a batch's wait against the poll interval and the dedup lease). Raises ConfigError."""

    kafka: KafkaSettings = field(default_factory=KafkaSettings)
    dedup: DedupSettings = field(default_factory=DedupSettings)
    model: ModelSettings = field(default_factory=ModelSettings)
    batching: BatchingSettings = field(default_factory=BatchingSettings)
    delivery: DeliverySettings = field(default_factory=DeliverySettings)
    operations: OperationsSettings = field(default_factory=OperationsSettings)
    # A group that names its own variables and flags (SCHEMA_REGISTRY_*, --request-format), as kafka_security does;
    # its settings are named by their field here too (``replace(request_format="avro")``).
    formats: Formats = field(default_factory=Formats)  # worker/core/formats.py
    # The models served, from the configuration file (worker/core/model_table.py); empty: the ``model`` setting's.
    models: ModelTable = field(default_factory=ModelTable)

    def __post_init__(self) -> None:
        _validate_across(self)

    @classmethod
    def from_values(cls, models: ModelTable | None = None, **values: Any) -> Settings:
        """Settings from values named as the settings are (``requests_topic="t", max_batch_size=8``), the rest
        at their defaults, serving ``models`` (default: the ``model`` setting's one); no derived defaults
        (``with_derived_defaults``). Raises ConfigError, TypeError for a name that is no setting."""
        return cls(models=models or ModelTable()).replace(**values)

    def replace(self, **values: Any) -> Settings:
        """These settings with the ones named changed, checked again. Raises ConfigError, TypeError for a
        name that is no setting."""
        changes: dict[str, dict[str, Any]] = {}
        for name, value in values.items():
            if name not in _SECTION_OF:
                raise TypeError(f"{name!r} is not a setting")
            changes.setdefault(_SECTION_OF[name], {})[name] = value
        return dataclasses.replace(self, **{section: dataclasses.replace(getattr(self, section), **changed)
                                            for section, changed in changes.items()})

    @classmethod
    def from_sources(cls, args: argparse.Namespace | None = None,
                     environ: Mapping[str, str] | None = None) -> Settings:
        """Defaults, overridden by the configuration file (``--config``, STREAMSCORE_CONFIG), overridden by
        environment variables, overridden by flags."""
        environ = os.environ if environ is None else environ
        config_path = (getattr(args, "config", None) if args is not None else None) or environ.get(CONFIG_ENV)
        config = read_config_file(config_path) if config_path else ConfigFile()
        if config_path:
            try:  # the file's own values, checked alone first: a bad one is said to be the file's
                cls.from_values(config.models, **_grouped(config.values), kafka_properties=config.properties)
            except ConfigError as exc:
                raise ConfigError(f"{config_path}: {exc} (fix it in the file: the file is checked on its own, "
                                  "whatever a flag or variable sets over it)") from None
        properties = tuple(ENV_PREFIXES.values())  # STREAMSCORE_KAFKA_CONSUMER_<NAME>: KafkaProperties' own
        registry.refuse_unknown({name: raw for name, raw in environ.items() if not name.startswith(properties)},
                                SETTINGS, also_known={*TOOLING_ENV, CONFIG_ENV})
        given = {**config.values, **registry.from_environment(SETTINGS, environ),
                 **registry.from_arguments(SETTINGS, args)}
        kafka_properties = config.properties.overridden_by(KafkaProperties.from_sources(args, environ))
        return cls.from_values(config.models, **_grouped(given),
                               kafka_properties=kafka_properties).with_derived_defaults()

    def only_model(self, name: str | None) -> Settings:
        """These settings as if the configuration file's model ``name`` (None: its default) were the only one: its
        model and batching settings in place of the top-level ones, and a table of it alone (its ``version``; no
        canary, shadow or topic): what score-file and inspect-model serve. Raises ConfigError listing the models
        when there is none of this name; without a model table, these settings."""
        if not self.models.entries:
            return self
        entry = self.models.entry(name or self.models.default)
        alone = dataclasses.replace(entry, topic="", canary="", canary_weight=0.0, shadow="", shadow_fraction=0.0)
        return dataclasses.replace(self, model=entry.model_settings(self.model), batching=entry.batching(self.batching),
                                   models=ModelTable((alone,), alone.name, self.models.source))

    @property
    def transactional_id(self) -> str:
        """With exactly-once, the transactional id the worker starts from: the one set (``delivery``'s, used as it
        is), else the default ``<group>.<client-id>.<host>``, made unique to its worker at start
        (worker/core/transactional_ids.py); "" without exactly-once."""
        if not self.delivery.exactly_once:
            return ""
        return self.delivery.transactional_id or own_transactional_id(self.kafka.group, self.kafka.client_id)

    def with_derived_defaults(self) -> Settings:
        """Unset names derived: the reply and dead-letter topics from the requests topic, the group from the
        model (the default one of a model table). An unset transactional id stays unset, so that an id the user
        gives is told from the default even in the default's form (``transactional_id``)."""
        kafka = self.kafka
        model = self.models.default if self.models.entries else self.model.model
        group = kafka.group or f"streamscore-{model.replace(':', '.').replace('/', '.')}"
        return self.replace(
            reply_topic=kafka.reply_topic or f"{kafka.requests_topic}.replies",
            dead_letter_topic=kafka.dead_letter_topic or f"{kafka.requests_topic}.dlq",
            shadow_topic=kafka.shadow_topic or f"{kafka.requests_topic}.shadow",
            group=group,
        )


def flag_sections() -> dict[str, type]:
    """The sections whose settings have flags and variables: all but the configuration file's model table."""
    return {name: kind for name, kind in get_type_hints(Settings).items() if kind is not ModelTable}


# Each setting's section, by name (kafka_security, the nested group, and the formats group's settings included).
_SECTION_OF = {f.name: section for section, kind in get_type_hints(Settings).items() for f in fields(kind)}
# What a job over files reads (score-file, score-ray): no Kafka, no dedup store, no commits.
FILE_JOB_SECTIONS: tuple[type, ...] = (ModelSettings, BatchingSettings, OperationsSettings)


def add_flags(parser: argparse.ArgumentParser, sections: tuple[type, ...] = SECTIONS) -> None:
    """Add one flag per setting of ``sections``, a group of them each (with Kafka's, its security settings, the
    request formats and the client properties); defaults stay None so that variables and --config can fill them.
    Settings of the sections left out still come from their variables and --config."""
    parser.add_argument("--config", metavar=CONFIG_ENV,
                        help="a TOML file of settings by name, and of the models served ([models.NAME] tables: "
                        "docs/fleet.md); variables and flags override its settings; SIGHUP reads its models again")
    kafka = KafkaSettings in sections
    registry.add_flags(parser, [s for s in SETTINGS if s.group.kind in sections or kafka and s.group.section in
                                ("kafka", "formats")])
    if kafka:
        add_property_flags(parser)


def _grouped(values: dict[str, Any]) -> dict[str, Any]:
    """Settings by key (``kafka_security.protocol``) as ``Settings.from_values`` takes them: the Kafka security
    settings as one KafkaSecurity."""
    groups = registry.by_group(SETTINGS, values)
    security = KafkaSecurity(**groups.pop(KafkaSecurity, {}))
    return {"kafka_security": security, **{name: value for group in groups.values() for name, value in group.items()}}


def _validate_across(s: Settings) -> None:
    """The checks between sections: how long a batch may wait (each model's), against the poll interval and the
    dedup lease; the topics given a request format of their own are read."""
    _check_wait(s.batching, s.kafka.max_poll_interval_ms, s.dedup.dedup_lease_ms)
    if s.delivery.exactly_once and not s.kafka.read_committed:
        raise ConfigError("the consumer property isolation.level=read_uncommitted cannot be used with "
                          "delivery=exactly-once: a request of an aborted transaction would be answered")
    read = {s.kafka.requests_topic, *s.models.topics()}
    for topic in sorted(s.formats.named_topics() - read):
        raise ConfigError(f"request_format (--request-format, STREAMSCORE_REQUEST_FORMAT) names topic {topic!r}, "
                          f"which this worker does not read (it reads {', '.join(sorted(filter(None, read)))})")
    _check_budget(s.model, s.models)
    for entry in s.models.entries:
        try:
            _check_wait(entry.batching(s.batching), s.kafka.max_poll_interval_ms, s.dedup.dedup_lease_ms)
            entry.model_settings(s.model)  # its own checks, at start
        except ConfigError as exc:
            raise ConfigError(f"[models.{entry.name}]: {exc}" if "[models." not in str(exc) else str(exc)) from None


def _check_budget(model: ModelSettings, table: ModelTable) -> None:
    """A memory budget needs models to load on first use, and room for those that are never let go."""
    budget = [name for name in ("max_loaded_models", "model_memory_mb") if getattr(model, name)]
    if budget and not table.entries:
        raise ConfigError(f"{budget[0]} needs a configuration file with [models.NAME] tables (--config): with the "
                          "one model of the model setting there is nothing to load on first use")
    pinned = table.pinned()
    on_first_use = len(table.entries) > len(pinned)
    if model.max_loaded_models and len(pinned) + on_first_use > model.max_loaded_models:
        raise ConfigError(f"max_loaded_models={model.max_loaded_models} is too few: the {len(pinned)} models of "
                          f"canary splits or shadow pairs ({', '.join(pinned)}) stay loaded"
                          + (", and the others need a place to load in on first use" if on_first_use else "")
                          + f"; raise it to {len(pinned) + on_first_use} at least")


def _check_wait(batching: BatchingSettings, poll_interval_ms: int, lease_ms: int) -> None:
    if batching.max_wait_ms >= poll_interval_ms:
        raise ConfigError(f"max_wait_ms ({batching.max_wait_ms}) must be well below max_poll_interval_ms "
                          f"({poll_interval_ms})")
    if batching.latency_target_ms >= poll_interval_ms:
        raise ConfigError(f"latency_target_ms ({batching.latency_target_ms}) must be well below max_poll_interval_ms "
                          f"({poll_interval_ms})")
    if lease_ms <= 2 * max(batching.max_wait_ms, batching.latency_target_ms):
        raise ConfigError(f"dedup_lease_ms ({lease_ms}) must exceed twice the batch wait (max_wait_ms "
                          f"{batching.max_wait_ms}, latency_target_ms {batching.latency_target_ms}): "
                          "a lease shorter than a batch's life lets two workers score one request")


def require_services(s: Settings) -> None:
    """Checks needed only by the streaming worker (score-file needs neither service)."""
    if not s.kafka.kafka_bootstrap_servers:
        raise ConfigError("KAFKA_BOOTSTRAP_SERVERS is not set: export it or pass --bootstrap-servers "
                          "(`make up` starts a local broker and prints it)")
    if not s.dedup.redis_url:
        raise ConfigError("REDIS_URL is not set: export it or pass --redis-url "
                          "(`make up` starts a local Redis and prints it; memory:// for a single test worker)")
    if not s.kafka.requests_topic:
        raise ConfigError("requests_topic is not set: pass --requests-topic or STREAMSCORE_REQUESTS_TOPIC")
