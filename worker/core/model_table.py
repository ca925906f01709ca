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
import difflib
import re
import tomllib
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from worker.core import registry
from worker.core.errors import ConfigError
from worker.core.kafka_properties import KafkaProperties
from worker.core.sections import SETTINGS, BatchingSettings, ModelSettings, per_model
from worker.core.wire import is_topic_name

S = TypeVar("S", ModelSettings, BatchingSettings)
ENTRY_NAME = re.compile(r"^[A-Za-z0-9._-]{1,128}$")
FILE_SUFFIXES = (".pt2", ".pt", ".ts", ".pth")  # a ``model`` value ending so is a file, found beside the config
MODEL_KEYS = per_model(ModelSettings)  # the settings a model's table may set (declared per_model)
BATCHING_KEYS = per_model(BatchingSettings)
TOP_LEVEL_KEYS = frozenset(s.name for s in SETTINGS if not s.group.table)  # settings written above any [table]
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
    """A configuration file read: its settings by key (``max_batch_size``, ``kafka_security.protocol``: the
    registry's keys, worker/core/registry.py), its client properties, and its model table."""

    values: dict[str, Any] = field(default_factory=dict)
    properties: KafkaProperties = field(default_factory=KafkaProperties)
    models: ModelTable = field(default_factory=ModelTable)


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
    tables = {s.group.table for s in SETTINGS if s.group.table}
    values = registry.from_file(SETTINGS, document, path, where.parent)
    properties = KafkaProperties()
    for key, value in document.items():
        if key == "kafka":
            for role, given in value.items() if isinstance(value, dict) else ():
                _refuse_top_level_keys(path, f"kafka.{role}", given)
            properties = KafkaProperties.from_tables(path, value)
        elif key in tables:
            values.update(_table(path, where, key, value))
        elif key not in values and key not in ("models", "default_model"):
            known = {*TOP_LEVEL_KEYS, *tables, "models", "default_model", "kafka"}
            raise ConfigError(f"{path}: unknown key {key!r}{_did_you_mean(key, known)}; "
                              "the top-level keys are settings named as the flags "
                              "are (max_batch_size for --max-batch-size; see `python -m worker run --help`), plus "
                              "default_model, [models.NAME] tables, [kafka.consumer] / [kafka.producer] "
                              f"client properties and the {', '.join(f'[{table}]' for table in sorted(tables))} "
                              "table")
    if isinstance(values.get("model"), str) and values["model"].endswith(FILE_SUFFIXES):
        values["model"] = _beside(where, values["model"])
    default_model = document.get("default_model", "")
    if not isinstance(default_model, str):
        raise ConfigError(f"{path}: default_model must be a string, got {default_model!r}")
    models = document.get("models", {})
    if not isinstance(models, dict):
        raise ConfigError(f"{path}: models must be tables, [models.NAME], one per model")
    entries = tuple(_entry(path, where, name, table) for name, table in models.items())
    try:
        return ConfigFile(values, properties, ModelTable(entries, default_model, path))
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc}") from None


def _table(path: str, where: Path, name: str, table: Any) -> dict[str, Any]:
    """The settings of the table ``[name]`` (``[kafka_security]``), by key."""
    if not isinstance(table, dict):
        raise ConfigError(f"{path}: {name} must be a table, [{name}]")
    mine = [s for s in SETTINGS if s.group.table == name]
    _refuse_top_level_keys(path, name, table)
    values = registry.from_file(mine, table, path, where.parent, name)
    for key in table:
        if f"{name}.{key}" not in values:
            keys = [s.name for s in mine if not s.declared.secret]
            raise ConfigError(f"{path}: [{name}] has no key {key!r}{_did_you_mean(key, keys)}; its keys: "
                              f"{', '.join(keys)}")
    return values


def _did_you_mean(key: str, known: Iterable[str]) -> str:
    close = difflib.get_close_matches(key, sorted(known), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _refuse_top_level_keys(path: str, name: str, table: Any) -> None:
    """Refuse a key of the table ``[name]`` that is a top-level setting (and not the table's own), saying why it
    is there: TOML puts every key written below a ``[table]`` header into that table."""
    own = set(ENTRY_KEYS) if name.startswith("models.") else {s.name for s in SETTINGS if s.group.table == name}
    for key, value in table.items() if isinstance(table, dict) else ():
        # A dict is a dotted key's first part (TOML reads delivery.timeout.ms = 1 as [delivery.timeout]), not one.
        if key in TOP_LEVEL_KEYS and key not in own and not isinstance(value, dict):
            raise ConfigError(f"{path}: [{name}] holds {key!r}, a top-level setting, not one of the table's: TOML puts "
                              "every key written below a [table] header into that table; move it above the file's "
                              "first [table]")


def _entry(path: str, where: Path, name: str, table: Any) -> ModelEntry:
    if not ENTRY_NAME.match(name):
        raise ConfigError(f"{path}: [models.{name}]: a model's name is 1-128 letters, digits, '.', '_' or '-' "
                          "(what requests give in their model field)")
    if not isinstance(table, dict):
        raise ConfigError(f"{path}: models.{name} must be a table ([models.{name}])")
    for key in table:
        if key not in ENTRY_KEYS:
            _refuse_top_level_keys(path, f"models.{name}", table)
            raise ConfigError(f"{path}: [models.{name}] has no key {key!r}{_did_you_mean(key, ENTRY_KEYS)}; a "
                              f"model's keys: {', '.join(ENTRY_KEYS)}")
    settings = {s.name: s for s in SETTINGS if s.declared.per_model}
    overrides = [(key, settings[key].from_toml(value, f"{path}: [models.{name}]", where.parent))
                 for key, value in table.items() if key in settings]
    overrides = [(key, _beside(where, value) if key == "model" and value.endswith(FILE_SUFFIXES) else value)
                 for key, value in overrides]
    version, canary, shadow = table.get("version", ""), table.get("canary", ""), table.get("shadow", "")
    topic = table.get("topic", "")
    weight, fraction = table.get("canary_weight", 0.0), table.get("shadow_fraction", 0.0)
    if not all(isinstance(text, str) for text in (version, canary, shadow, topic)):
        raise ConfigError(f"{path}: [models.{name}] version, topic, canary and shadow must be strings")
    if topic and not is_topic_name(topic):
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


def _beside(config: Path, value: str) -> str:
    """A relative path is relative to the configuration file's folder."""
    path = Path(value)
    return value if path.is_absolute() else str(config.parent / path)
