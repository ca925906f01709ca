"""Every setting declared once, and read the same way from each source.

A setting is a field of a settings dataclass (worker/core/sections.py, security.py, formats.py) declared with
``setting(default, help, ...)``: its name, type and default are the field's; its help, environment variable,
flag, and whether a ``[models.NAME]`` table may set it, the configuration file may hold it (a secret never) and
it is a path (found beside the configuration file) are what ``setting`` records. From that one declaration
come the flags and ``--help`` (``add_flags``), the environment (``from_environment``), the configuration file
(``from_file``), the per-model keys (``per_model``) and the table of docs/configuration.md
(worker/settings_doc.py).

Names: a setting's variable is ``STREAMSCORE_<NAME>`` unless it declares another (``REDIS_URL``,
``KAFKA_SASL_MECHANISM``); its flag is the variable's name, or else its own, in lower case with dashes
(``--redis-url``, ``--kafka-sasl-mechanism``, ``--max-batch-size``) unless it declares another. Its key, what the
configuration file and ``argparse`` call it, is its name, within its group's table when the group has one
(``kafka_security.protocol``).
"""

from __future__ import annotations

import argparse
import difflib
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from worker.core.errors import ConfigError

ENV_PREFIX = "STREAMSCORE_"
SETTING = "setting"  # the metadata key of a declared field
TRUE, FALSE = ("1", "true", "yes"), ("0", "false", "no")


@dataclass(frozen=True)
class Declared:
    """What ``setting`` records of a field, beside its name, type and default."""

    help: str
    env: str = ""  # "": STREAMSCORE_<NAME>
    flag: str = ""  # "": from the variable's name, or the setting's
    per_model: bool = False  # a [models.NAME] table may set it
    secret: bool = False  # never in the configuration file: name the file that holds it
    path: bool = False  # a file: a relative path in the configuration file is relative to its folder


def setting(default: Any, help: str, *, env: str = "", flag: str = "", per_model: bool = False,
            secret: bool = False, path: bool = False) -> Any:
    """Declare a field a setting (``default`` may be a zero-argument class, for a default made anew each time)."""
    metadata = {SETTING: Declared(help, env, flag, per_model, secret, path)}
    if isinstance(default, type):
        return field(default_factory=default, metadata=metadata)
    return field(default=default, metadata=metadata)


@dataclass(frozen=True)
class Group:
    """A settings dataclass as a source of settings: the Settings field that holds it, the table its keys are
    written in ("" for the top level), its title in --help, the variable prefixes it owns (an unknown variable
    under one of them is a typo, refused), and those it shares with other software (``REDIS_``: an unknown
    variable there is refused only when it is a near miss of one of its settings' names)."""

    section: str
    kind: type
    title: str
    table: str = ""
    owns: tuple[str, ...] = ()
    shares: tuple[str, ...] = ()


@dataclass(frozen=True)
class Setting:
    """One declared setting, as every source names and reads it."""

    name: str
    group: Group
    kind: type
    default: Any
    declared: Declared

    @property
    def key(self) -> str:
        return f"{self.group.table}.{self.name}" if self.group.table else self.name

    @property
    def env(self) -> str:
        return self.declared.env or ENV_PREFIX + self.name.upper()

    @property
    def flag(self) -> str:
        return self.declared.flag or "--" + (self.declared.env or self.name).lower().replace("_", "-")

    @property
    def help(self) -> str:
        return self.declared.help

    def from_text(self, raw: str, given_as: str) -> Any:
        """The value of a variable's or a flag's text. Raises ConfigError naming ``given_as``."""
        if self.kind is bool:
            if raw.lower() not in TRUE + FALSE:
                raise ConfigError(f"{given_as}={raw!r} is not a valid boolean: use true or false (setting {self.key})")
            return raw.lower() in TRUE
        try:
            return self.kind(raw)
        except ValueError:
            raise ConfigError(f"{given_as}={raw!r} is not a valid {self.kind.__name__} (setting {self.key})") from None

    def from_toml(self, value: Any, source: str, where: Path | None) -> Any:
        """The value the configuration file gave, checked against the type (an integer is taken for a float),
        a relative path made relative to the file's folder ``where``. Raises ConfigError naming ``source``."""
        if self.declared.secret:
            raise ConfigError(f"{source}: {self.key}: a secret does not go in the configuration file; name the file "
                              f"that holds it ({self.key}_file = \"...\")")
        if self.kind is float and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        if type(value) is not self.kind:
            raise ConfigError(f"{source}: {self.key} must be {_a(self.kind.__name__)}, got {value!r}")
        if self.declared.path and value and where is not None and not Path(str(value)).is_absolute():
            return str(where / str(value))
        return value


def _a(noun: str) -> str:
    """``noun`` with its indefinite article: an int, a float."""
    return f"{'an' if noun[0] in 'aeiou' else 'a'} {noun}"


def declared(*groups: Group) -> tuple[Setting, ...]:
    """The settings of ``groups``, in the order of their fields."""
    found = []
    for group in groups:
        for f in fields(group.kind):
            if SETTING in f.metadata:
                default = f.default_factory() if callable(f.default_factory) else f.default
                found.append(Setting(f.name, group, type(default), default, f.metadata[SETTING]))
    return tuple(found)


def add_flags(parser: argparse.ArgumentParser, settings: Iterable[Setting]) -> None:
    """One flag per setting, a group of flags per settings group (its title, its docstring); defaults stay None so
    that the variables and the configuration file fill them. A boolean that is false by default is a switch
    (``--otel``); one that is true by default takes true or false."""
    groups: dict[Group, argparse._ArgumentGroup] = {}
    for s in settings:
        if s.group not in groups:
            groups[s.group] = parser.add_argument_group(s.group.title, (s.group.kind.__doc__ or "").split("\n\n")[0])
        if s.kind is bool and s.default is False:
            groups[s.group].add_argument(s.flag, dest=s.key, action="store_const", const=True, default=None,
                                         help=f"{s.help} ({s.env}=true)")
            continue
        shown = _shown_default(s)
        kind = s.kind if s.kind in (int, float) else str
        groups[s.group].add_argument(s.flag, dest=s.key, type=kind, metavar=s.env, help=f"{s.help}{shown}")


def _shown_default(s: Setting) -> str:
    """`` (default: ...)`` as --help ends a setting's line: booleans as their variables take them (true, false),
    nothing for a secret or an empty default."""
    if s.declared.secret or s.default == "":
        return ""
    return f" (default: {str(s.default).lower() if isinstance(s.default, bool) else s.default})"


def from_arguments(settings: Iterable[Setting], args: argparse.Namespace | None) -> dict[str, Any]:
    """The settings given as flags, by key."""
    values: dict[str, Any] = {}
    for s in settings:
        given = getattr(args, s.key, None) if args is not None else None
        if given is not None:
            values[s.key] = s.from_text(given, s.flag) if isinstance(given, str) else given
    return values


def from_environment(settings: Iterable[Setting], environ: Mapping[str, str]) -> dict[str, Any]:
    """The settings given as variables, by key; an empty variable is unset."""
    return {s.key: s.from_text(environ[s.env], s.env) for s in settings
            if environ.get(s.env) and not kubernetes_service_link(s.env, environ[s.env])}


def from_file(settings: Iterable[Setting], table: Mapping[str, Any], source: str, where: Path | None,
              table_name: str = "") -> dict[str, Any]:
    """The settings of one table of the configuration file (``table_name``: "" for the top level), by key. Keys
    that are no setting of that table are left for the caller."""
    mine = {s.name: s for s in settings if s.group.table == table_name}
    return {mine[name].key: mine[name].from_toml(value, source, where) for name, value in table.items()
            if name in mine}


def refuse_unknown(environ: Mapping[str, str], settings: Iterable[Setting], also_known: Iterable[str] = (),
                   prefixes: tuple[str, ...] = ()) -> None:
    """Raise ConfigError for a variable under a prefix that the settings' groups own (or ``prefixes``) that is no
    setting's, naming the closest one there is; under a prefix a group shares, only for a near miss of a setting's
    name (REDIS_PASSWORD_FLE, not another program's REDIS_HOST)."""
    settings = list(settings)
    owned = tuple({*prefixes, *(prefix for s in settings for prefix in s.group.owns)})
    shared = tuple({prefix for s in settings for prefix in s.group.shares})
    known = sorted({s.env for s in settings} | set(also_known))
    for name in sorted(environ):
        if name in known or kubernetes_service_link(name, environ[name]):
            continue
        if name.startswith(owned):
            close = difflib.get_close_matches(name, known, n=1)
            hint = f"did you mean {close[0]}?" if close else "see `python -m worker run --help` for the valid ones"
            raise ConfigError(f"unknown setting {name}; {hint}")
        if shared and name.startswith(shared) and f"{name}_FILE" not in known and (
                close := difflib.get_close_matches(name, known, n=1, cutoff=NEAR_MISS)):
            raise ConfigError(f"unknown setting {name}; did you mean {close[0]}? (other variables starting "
                              f"{name.split('_', 1)[0]}_ are left to the software that reads them)")


NEAR_MISS = 0.9  # difflib's ratio: REDIS_PASSWORD_FLE is 0.97 from REDIS_PASSWORD_FILE, REDIS_PASSWORD 0.85


# The variables Kubernetes gives every pod for each Service of its namespace (enableServiceLinks, on by default),
# by their name's end and the shape of their value: a Service named streamscore-worker or schema-registry makes
# STREAMSCORE_WORKER_PORT=tcp://10.96.0.10:8080, SCHEMA_REGISTRY_SERVICE_HOST=10.96.0.11, and so on.
_LINK_ADDRESS = r"\d{1,3}(\.\d{1,3}){3}|\[?[0-9A-Fa-f]*:[0-9A-Fa-f:.]*\]?"  # IPv4, or IPv6 (bracketed in a URL)
_SERVICE_LINKS = tuple((re.compile(name), re.compile(value)) for name, value in (
    (r"[A-Z0-9_]+_SERVICE_HOST", _LINK_ADDRESS),
    (r"[A-Z0-9_]+_SERVICE_PORT(_[A-Z0-9_]+)?", r"\d+"),
    (r"[A-Z0-9_]+_PORT(_\d+_(TCP|UDP|SCTP))?", rf"(tcp|udp|sctp)://({_LINK_ADDRESS}):\d+"),
    (r"[A-Z0-9_]+_PORT_\d+_(TCP|UDP|SCTP)_PROTO", r"tcp|udp|sctp"),
    (r"[A-Z0-9_]+_PORT_\d+_(TCP|UDP|SCTP)_PORT", r"\d+"),
    (r"[A-Z0-9_]+_PORT_\d+_(TCP|UDP|SCTP)_ADDR", _LINK_ADDRESS),
))


def kubernetes_service_link(name: str, value: str) -> bool:
    """Whether a variable is one Kubernetes sets for a Service (its name's end and its value both fit): not a
    setting, whatever prefix it starts with, so it is left alone rather than refused as a misspelt one, or read
    as a setting of the same name (a Service named streamscore-http makes STREAMSCORE_HTTP_PORT=tcp://...)."""
    return any(pattern.fullmatch(name) and shape.fullmatch(value) for pattern, shape in _SERVICE_LINKS)


def by_group(settings: Iterable[Setting], values: Mapping[str, Any]) -> dict[type, dict[str, Any]]:
    """``values`` by key, as keyword arguments of each group's dataclass."""
    split: dict[type, dict[str, Any]] = {}
    for s in settings:
        if s.key in values:
            split.setdefault(s.group.kind, {})[s.name] = values[s.key]
    return split


def unusable_file(env: str, path: str) -> str | None:
    """Why the file a setting names (``env``, a variable ending _FILE) cannot serve, or None: it must exist, be a
    file (a directory or a device such as /dev/null holds no secret), and be readable by this user."""
    if not path:
        return None
    if not os.path.exists(path):
        return f"{env}={path}: no such file"
    if not os.path.isfile(path):
        return f"{env}={path}: {'a directory' if os.path.isdir(path) else 'a device or a pipe'}, not a file"
    if not os.access(path, os.R_OK):
        return f"{env}={path}: not readable by this user"
    return None
