"""The table of settings in docs/configuration.md, written from ``Settings`` so that it cannot drift.

    python -m worker.settings_doc           # rewrite the table in docs/configuration.md
    python -m worker.settings_doc --check   # exit 1, changing nothing, if the table there is stale

One table per section of ``Settings``, headed by the section's name and its
docstring's first line; one row per setting declared in the registry
(worker/core/registry.py: each section's, the Kafka security settings, the
formats group), with its key (what the configuration file calls it), its flag,
its variable, its default, whether a ``[models.NAME]`` table may set it, and its
help text; then the client properties (worker/core/kafka_properties.py).
Then, between COMMANDS_BEGIN and COMMANDS_END, one table per other command
(``score-file``, ``backfill``, ...) of the flags that are its own, not
settings. Only the lines between the markers are written; the prose around
them is edited by hand.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from worker.core.kafka_properties import KafkaProperties
from worker.core.sections import SETTINGS
from worker.core.settings import add_flags, flag_sections
from worker.doc_tables import escape, replace_between, write_or_check

DOC = Path(__file__).resolve().parent.parent / "docs" / "configuration.md"
COMMAND = "python -m worker.settings_doc"
BEGIN = f"<!-- BEGIN settings table: written by `{COMMAND}` from worker/core/settings.py; do not edit -->"
END = "<!-- END settings table -->"
COMMANDS_BEGIN = f"<!-- BEGIN command flags: written by `{COMMAND}` from worker/cli.py; do not edit -->"
COMMANDS_END = "<!-- END command flags -->"


@dataclass(frozen=True)
class Row:
    section: str  # the Settings field that holds it: kafka, dedup, ...
    setting: str  # its key: the configuration file's name for it
    flag: str
    env: str
    default: str
    per_model: bool  # a [models.NAME] table may set it
    help: str


def rows() -> list[Row]:
    """Every setting, section by section, in the order of the registry; the client properties after Kafka's."""
    table = [Row(s.group.section, s.key, s.flag, s.env, _shown(s.default), s.declared.per_model,
                 s.help + (" Never in the configuration file." if s.declared.secret else "")) for s in SETTINGS]
    properties = [Row("kafka", f"kafka_properties.{f.name}", f.metadata["flag"], f.metadata["env"], "", False,
                      f.metadata["help"]) for f in fields(KafkaProperties)]
    last_kafka = max(i for i, row in enumerate(table) if row.section == "kafka")
    return table[:last_kafka + 1] + properties + table[last_kafka + 1:]


def render() -> str:
    """The tables, one per section, markers included."""
    lines = [BEGIN]
    for section, kind in flag_sections().items():
        summary = (kind.__doc__ or "").strip().splitlines()[0]
        lines += ["", f"### `{section}`", "", escape(summary), "",
                  "| setting | flag | environment variable | default | per model | meaning |",
                  "|---|---|---|---|---|---|"]
        lines += [f"| `{r.setting}` | `{r.flag}` | `{r.env}` | {r.default} | {'yes' if r.per_model else ''} | "
                  f"{escape(r.help)} |" for r in rows() if r.section == section]
    return "\n".join([*lines, "", END])


def command_flags() -> dict[str, list[argparse.Action]]:
    """Each command but ``run``, with the flags and arguments it has beyond the settings (all of its own, for a
    command that takes none of the settings: ``compare``), in its --help's order."""
    from worker.cli import _parser

    settings = argparse.ArgumentParser(add_help=False)
    add_flags(settings)
    setting_flags = {option for action in settings._actions for option in action.option_strings}
    commands = next(a for a in _parser()._actions if isinstance(a, argparse._SubParsersAction)).choices
    flags = {}
    for name, parser in commands.items():
        shared = {"-h", "--help"} | (set() if name in TAKES_NO_SETTINGS else setting_flags)
        if name != "run":
            flags[name] = [a for a in parser._actions if not shared & set(a.option_strings)]
    return flags


TAKES_NO_SETTINGS = ("compare",)  # worker/cli.py runs it before any setting is read: a flag named as one is its own


def render_commands() -> str:
    """The tables of the other commands' own flags, markers included."""
    lines = [COMMANDS_BEGIN]
    for name, actions in command_flags().items():
        lines += ["", f"### `{name}`", "", "| flag or argument | default | meaning |", "|---|---|---|"]
        for action in actions:
            shown = ", ".join(action.option_strings) or str(action.metavar or action.dest).upper()
            default = "" if action.default in (None, False, argparse.SUPPRESS) or not action.option_strings else (
                f"`{action.default}`")
            meaning = " ".join((action.help or "").replace("%(default)s", str(action.default)).split())
            lines.append(f"| `{shown}` | {default} | {escape(meaning)} |")
    return "\n".join([*lines, "", COMMANDS_END])


def update(text: str) -> str:
    """``text`` with the settings tables and the command tables replaced by ``render()`` and
    ``render_commands()``. Raises ValueError without the markers."""
    return replace_between(replace_between(text, BEGIN, END, render()), COMMANDS_BEGIN, COMMANDS_END,
                           render_commands())


def main(argv: list[str] | None = None) -> int:
    return write_or_check(argv, COMMAND, DOC, "the settings table", update)


def _shown(value: Any) -> str:
    if value == ():  # the client properties: none by default
        return ""
    text = str(value).lower() if isinstance(value, bool) else str(value)  # a Secret's str is "" or "***"
    return f"`{text}`" if text else ""



if __name__ == "__main__":
    sys.exit(main())
