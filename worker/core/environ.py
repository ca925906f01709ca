"""Environment variables a settings group owns by prefix: one that the group does not know is a typo, refused."""

from __future__ import annotations

import difflib
from collections.abc import Collection, Mapping

from worker.core.errors import ConfigError


def refuse_unknown(environ: Mapping[str, str], prefixes: str | tuple[str, ...], known: Collection[str],
                   group: str) -> None:
    """Raise ConfigError for the first variable that starts with one of ``prefixes`` and is not ``known``,
    naming the closest known one (or all of them). ``group`` says whose settings they are, e.g. "Kafka security"."""
    names = sorted(known)
    for name in environ:
        if name.startswith(prefixes) and name not in known:
            close = difflib.get_close_matches(name, names, n=1)
            hint = f"; did you mean {close[0]}?" if close else f"; the known ones are {', '.join(names)}"
            raise ConfigError(f"unknown {group} setting {name}{hint}")
