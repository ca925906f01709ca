"""The worker's configuration file: settings by name, and the models it serves (``--config worker.toml``).

A TOML file. Its top-level keys are settings, named as everywhere else
(``requests_topic``, ``max_poll_records``: the flags' names with
underscores); environment variables and flags override them. Its
``[models.NAME]`` tables declare the models served, each under the name that
requests give in their ``model`` field (or header)::

    default_model = "churn"            # what a request that names no model gets (default: the first)

    [models.churn]
    model = "churn"                    # as --model: a built-in, a .pt2 or TorchScript file, module:factory
    max_batch_size = 64                # each model batches on its own: size, wait, token limits
    canary = "churn-next"              # another entry answers this share of churn's requests
    canary_weight = 0.1
    shadow = "churn-next"              # ... and scores this share of them too, off the record (a shadow topic)
    shadow_fraction = 0.05

    [models.churn-next]
    model = "models/churn_v2.pt2"      # relative paths are relative to this file
    version = "2"                      # what its replies carry (default: the model's own version)

    [models.fraud]
    model = "fraud.pt2"
    topic = "fraud-requests"           # consumed too; its requests that name no model are fraud's

Each entry needs its ``model``; its other unset keys take the top-level value of that setting (``device``,
``max_batch_size`` ...). Without a ``[models]`` table the worker serves the
one model of the ``model`` setting, as it always did. The Kafka security
settings go in a ``[kafka_security]`` table (``protocol = "SASL_SSL"``,
``ssl_cafile = "ca.pem"``), the request format and schema registry ones at
the top (``request_format = "avro"``); a secret only by the file that holds it
(``sasl_password_file``, ``registry_password_file``), never its value. Raises
ConfigError naming the file and key.
"""

from __future__ import annotations

import dataclasses
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from worker.core.errors import ConfigError
from worker.core.formats import Formats
from worker.core.kafka_properties import KafkaProperties
from worker.core.sections import BatchingSettings, ModelSettings, setting_fields
from worker.core.security import KafkaSecurity

S = TypeVar("S", ModelSettings, BatchingSettings)
ENTRY_NAME = re.compile(r"^[A-Za-z0-9._-]{1,128}$")
FILE_SUFFIXES = (".pt2", ".pt", ".ts", ".pth")  # a ``model`` value ending so is a file, found beside the config
MODEL_KEYS = ("model", "model_config", "weights", "allow_pickle", "device", "amp")
BATCHING_KEYS = ("max_batch_size", "max_wait_ms", "max_batch_tokens", "latency_target_ms")
ENTRY_KEYS = (*MODEL_KEYS, *BATCHING_KEYS, "version", "topic", "canary", "canary_weight", "shadow",
              "shadow_fraction")


@dataclass(frozen=True)
class ModelEntry:
    """One served model: its ``name``, what it overrides of the top-level model and batching settings, the
    ``version`` its replies carry (empty: the model's own), the requests ``topic`` of its own (whose requests
    that name no model are its), the ``canary`` entry that answers ``canary_weight`` of its requests, and the
    ``shadow`` entry that also scores ``shadow_fraction`` of them, off the record."""

    name: str
    overrides: tuple[tuple[str, Any], ...] = ()
    version: str = ""
    topic: str = ""
    canary: str = ""
    canary_weight: float = 0.0
    shadow: str = ""
    shadow_fraction: float = 0.0

    def model_settings(self, base: ModelSettings) -> ModelSettings:
        """The top-level model settings with this entry's own. Raises ConfigError naming the entry."""
        return self._replace(base, MODEL_KEYS)

    def batching(self, base: BatchingSettings) -> BatchingSettings:
        """The top-level batching settings with this entry's own. Raises ConfigError naming the entry."""
        return self._replace(base, BATCHING_KEYS)

    def _replace(self, base: S, keys: tuple[str, ...]) -> S:
        changes = {key: value for key, value in self.overrides if key in keys}
        try:
            return dataclasses.replace(base, **changes)
        except ConfigError as exc:
            raise ConfigError(f"[models.{self.name}]: {exc}") from None


@dataclass(frozen=True)
class ModelTable:
    """The models of the configuration file, and the default one; empty: the one ``model`` setting."""

    entries: tuple[ModelEntry, ...] = ()
    default_model: str = ""
    source: str = ""  # the configuration file it was read from (a SIGHUP reads it again)

    def __post_init__(self) -> None:
        names = [entry.name for entry in self.entries]
        if self.default_model and self.default_model not in names:
            raise ConfigError(f"default_model {self.default_model!r} is not one of the models declared "
                              f"([models.NAME]): {', '.join(names) or 'none'}")
        canaries = {entry.canary for entry in self.entries if entry.canary}
        topics = [entry.topic for entry in self.entries if entry.topic]
        if len(set(topics)) < len(topics):
            twice = sorted({topic for topic in topics if topics.count(topic) > 1})
            raise ConfigError(f"topic {twice[0]!r} is the topic of two models: a topic's requests go to one")
        for entry in self.entries:
            if entry.shadow and (entry.shadow not in names or entry.shadow == entry.name):
                raise ConfigError(f"[models.{entry.name}] shadow {entry.shadow!r} must name another model declared "
                                  f"here: {', '.join(n for n in names if n != entry.name) or 'none'}")
            if entry.shadow and not 0 < entry.shadow_fraction <= 1:
                raise ConfigError(f"[models.{entry.name}] shadow_fraction must be above 0 and at most 1 (the share "
                                  f"of its requests its shadow scores too), got {entry.shadow_fraction}")
            if not entry.canary:
                continue
            if entry.canary not in names or entry.canary == entry.name:
                raise ConfigError(f"[models.{entry.name}] canary {entry.canary!r} must name another model "
                                  f"declared here: {', '.join(n for n in names if n != entry.name) or 'none'}")
            if entry.name in canaries:
                raise ConfigError(f"[models.{entry.name}] is a canary and has a canary of its own: one split per "
                                  "model name")
            if not 0 < entry.canary_weight < 1:
                raise ConfigError(f"[models.{entry.name}] canary_weight must be above 0 and below 1 (the share "
                                  f"of its requests its canary answers), got {entry.canary_weight}")

    @property
    def default(self) -> str:
        return self.default_model or self.entries[0].name

    def topics(self) -> dict[str, str]:
        """Each requests topic of a model of its own, and that model."""
        return {entry.topic: entry.name for entry in self.entries if entry.topic}

    def pinned(self) -> list[str]:
        """The models always in memory, even under a memory budget: those of a canary split or a shadow pair
        (both arms answer one name; a shadow compares what its model answered)."""
        paired = {name for entry in self.entries if entry.canary or entry.shadow
                  for name in (entry.name, entry.canary, entry.shadow) if name}
        return [entry.name for entry in self.entries if entry.name in paired]

    def entry(self, name: str) -> ModelEntry:
        """Raises ConfigError listing the entries when there is none of this name."""
        for entry in self.entries:
            if entry.name == name:
                return entry
        raise ConfigError(f"no model {name!r} in the configuration file; declared: "
                          f"{', '.join(e.name for e in self.entries)}")


@dataclass(frozen=True)
class ConfigFile:
    """A configuration file read: its top-level settings by name, and its model table; its Kafka security and
    format settings by field name, for KafkaSecurity.from_sources and Formats.from_sources."""

    settings: dict[str, Any] = field(default_factory=dict)
    models: ModelTable = field(default_factory=ModelTable)
    security: dict[str, Any] = field(default_factory=dict)
    formats: dict[str, Any] = field(default_factory=dict)


def read_config_file(path: str) -> ConfigFile:
    """Read and check ``path``. Raises ConfigError naming the file, and the key, for anything wrong."""
    where = Path(path)
    try:
        document = tomllib.loads(where.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"cannot read the configuration file {path} (--config, STREAMSCORE_CONFIG): "
                          f"{exc.strerror}") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"the configuration file {path} is not valid TOML: {exc}") from None
    kinds = {f.name: type(f.default) for f in setting_fields()}
    format_kinds = {f.name: type(f.default) for f in dataclasses.fields(Formats)}
    settings: dict[str, Any] = {}
    formats: dict[str, Any] = {}
    security: dict[str, Any] = {}
    for key, value in document.items():
        if key in ("models", "default_model"):
            continue
        if key == "kafka":
            settings["kafka_properties"] = KafkaProperties.from_tables(path, value)
        elif key == "kafka_security":
            security = _security(path, where, value)
        elif key in format_kinds:
            formats[key] = _typed(path, key, value, format_kinds[key])
            if key in FORMAT_FILES and value:
                formats[key] = _beside(where, value)
        elif key in kinds:
            settings[key] = _typed(path, key, value, kinds[key])
        else:
            raise ConfigError(f"{path}: unknown key {key!r}; the top-level keys are settings named as the flags "
                              "are (max_batch_size for --max-batch-size; see `python -m worker run --help`), plus "
                              "default_model, [models.NAME] tables, [kafka.consumer] / [kafka.producer] "
                              "client properties and a [kafka_security] table")
    for key in ("model_config", "weights"):
        if settings.get(key):
            settings[key] = _beside(where, settings[key])
    if isinstance(settings.get("model"), str) and settings["model"].endswith(FILE_SUFFIXES):
        settings["model"] = _beside(where, settings["model"])
    default_model = document.get("default_model", "")
    if not isinstance(default_model, str):
        raise ConfigError(f"{path}: default_model must be a string, got {default_model!r}")
    tables = document.get("models", {})
    if not isinstance(tables, dict):
        raise ConfigError(f"{path}: models must be tables, [models.NAME], one per model")
    entries = tuple(_entry(path, where, name, table, kinds) for name, table in tables.items())
    try:
        return ConfigFile(settings, ModelTable(entries, default_model, path), security, formats)
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc}") from None


FORMAT_FILES = ("registry_password_file", "registry_ca_file")
SECURITY_FILES = ("sasl_password_file", "sasl_oauth_token_file", "ssl_cafile", "ssl_certfile", "ssl_keyfile")


def _security(path: str, where: Path, table: Any) -> dict[str, Any]:
    """The [kafka_security] table's settings by KafkaSecurity field name, their files found beside the config."""
    if not isinstance(table, dict):
        raise ConfigError(f"{path}: kafka_security must be a table, [kafka_security]")
    kinds = {f.name: type(f.default) for f in dataclasses.fields(KafkaSecurity)}
    values: dict[str, Any] = {}
    for key, value in table.items():
        if key == "sasl_password":
            raise ConfigError(f"{path}: [kafka_security] sasl_password: a secret does not go in the configuration "
                              "file; name the file that holds it, sasl_password_file = \"...\"")
        if key not in kinds:
            raise ConfigError(f"{path}: [kafka_security] has no key {key!r}; its keys: "
                              f"{', '.join(name for name in kinds if name != 'sasl_password')}")
        values[key] = _typed(path, f"kafka_security.{key}", value, kinds[key])
        if key in SECURITY_FILES and value:
            values[key] = _beside(where, value)
    return values


def _entry(path: str, where: Path, name: str, table: Any, kinds: dict[str, type]) -> ModelEntry:
    if not ENTRY_NAME.match(name):
        raise ConfigError(f"{path}: [models.{name}]: a model's name is 1-128 letters, digits, '.', '_' or '-' "
                          "(what requests give in their model field)")
    if not isinstance(table, dict):
        raise ConfigError(f"{path}: models.{name} must be a table ([models.{name}])")
    overrides: list[tuple[str, Any]] = []
    for key, value in table.items():
        if key not in ENTRY_KEYS:
            raise ConfigError(f"{path}: [models.{name}] has no key {key!r}; a model's keys: {', '.join(ENTRY_KEYS)}")
        if key in kinds:
            value = _typed(path, f"models.{name}.{key}", value, kinds[key])
            if key in ("model_config", "weights") and value or key == "model" and value.endswith(FILE_SUFFIXES):
                value = _beside(where, value)
            overrides.append((key, value))
    version, canary, shadow = table.get("version", ""), table.get("canary", ""), table.get("shadow", "")
    topic = table.get("topic", "")
    weight, fraction = table.get("canary_weight", 0.0), table.get("shadow_fraction", 0.0)
    if not all(isinstance(text, str) for text in (version, canary, shadow, topic)):
        raise ConfigError(f"{path}: [models.{name}] version, topic, canary and shadow must be strings")
    if topic and not re.fullmatch(r"[a-zA-Z0-9._-]{1,249}", topic):
        raise ConfigError(f"{path}: [models.{name}] topic {topic!r} is not a Kafka topic name")
    for key, number in (("canary_weight", weight), ("shadow_fraction", fraction)):
        if isinstance(number, bool) or not isinstance(number, int | float):
            raise ConfigError(f"{path}: [models.{name}] {key} must be a number between 0 and 1, got {number!r}")
    if bool(shadow) != ("shadow_fraction" in table):
        raise ConfigError(f"{path}: [models.{name}] shadow and shadow_fraction go together: give both or neither")
    if "model" not in table:
        raise ConfigError(f"{path}: [models.{name}] needs model = \"...\": a built-in name, a .pt2 or TorchScript "
                          "file, or package.module:factory (as --model)")
    if bool(canary) != ("canary_weight" in table):
        raise ConfigError(f"{path}: [models.{name}] canary and canary_weight go together: give both or neither")
    return ModelEntry(name, tuple(overrides), version, topic, canary, float(weight), shadow, float(fraction))


def _typed(path: str, key: str, value: Any, kind: type) -> Any:
    """``value`` when TOML gave it the setting's type (an integer where a float is asked is taken)."""
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if type(value) is not kind:
        raise ConfigError(f"{path}: {key} must be a {kind.__name__}, got {value!r}")
    return value


def _beside(config: Path, value: str) -> str:
    """A relative path is relative to the configuration file's folder."""
    path = Path(value)
    return value if path.is_absolute() else str(config.parent / path)
