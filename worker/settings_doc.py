"""The table of settings in docs/configuration.md, written from ``Settings`` so that it cannot drift.

    python -m worker.settings_doc           # rewrite the table in docs/configuration.md
    python -m worker.settings_doc --check   # exit 1, changing nothing, if the table there is stale

One table per section of ``Settings`` (worker/core/sections.py, and the
formats group of worker/core/formats.py), headed by the section's name and its
docstring's first line; one row per setting of ``python -m worker run``: each
field of the section and of its nested groups (the Kafka security settings,
worker/core/security.py), with the flag ``add_flags`` gives it, the environment
variable it is read from, its default and its help text. Then, between COMMANDS_BEGIN and COMMANDS_END, one table
per other command (``score-file``, ``backfill``, ...) of the flags that are its own, not settings. Only the lines
between the markers are written; the prose around them is edited by hand.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import MISSING, Field, dataclass, fields
from pathlib import Path
from typing import Any

from worker.core.sections import env_name
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
    setting: str
    flag: str
    env: str
    default: str
    help: str


def rows() -> list[Row]:
    """Every setting, section by section, in the order of the dataclasses. Raises KeyError for a field that has
    no flag."""
    parser = argparse.ArgumentParser(add_help=False)
    add_flags(parser)
    actions = [a for a in parser._actions if a.option_strings]
    by_dest = {a.dest: a.option_strings[0] for a in actions}
    by_metavar = {a.metavar: a.option_strings[0] for a in actions if isinstance(a.metavar, str)}
    table: list[Row] = []
    for section, kind in flag_sections().items():
        if all("env" in f.metadata for f in fields(kind)):  # formats: a group naming its own variables, whole
            table += _group_rows(section, "", kind, by_metavar)
            continue
        for f in fields(kind):
            if f.metadata.get("nested"):
                table += _group_rows(section, f"{f.name}.", _default(f), by_metavar)
                continue
            table.append(Row(section, f.name, by_dest[f.name], env_name(f.name), _shown(_default(f)),
                             f.metadata["help"]))
    return table


def _group_rows(section: str, prefix: str, group: Any, by_metavar: dict[str, str]) -> list[Row]:
    """The rows of a group that names its own variables (kafka_security, formats; kafka_properties names its flags
    too); its flags are named after them."""
    return [Row(section, prefix + sub.name, sub.metadata.get("flag") or by_metavar[sub.metadata["env"]],
                sub.metadata["env"], _shown(_default(sub)), sub.metadata["help"]) for sub in fields(group)]


def render() -> str:
    """The tables, one per section, markers included."""
    lines = [BEGIN]
    for section, kind in flag_sections().items():
        summary = (kind.__doc__ or "").strip().splitlines()[0]
        lines += ["", f"### `{section}`", "", escape(summary), "",
                  "| setting | flag | environment variable | default | meaning |", "|---|---|---|---|---|"]
        lines += [f"| `{r.setting}` | `{r.flag}` | `{r.env}` | {r.default} | {escape(r.help)} |" for r in rows()
                  if r.section == section]
    return "\n".join([*lines, "", END])


def command_flags() -> dict[str, list[argparse.Action]]:
    """Each command but ``run``, with the flags and arguments it has beyond the settings, in its --help's order."""
    from worker.cli import _parser

    settings = argparse.ArgumentParser(add_help=False)
    add_flags(settings)
    shared = {option for action in settings._actions for option in action.option_strings} | {"-h", "--help"}
    commands = next(a for a in _parser()._actions if isinstance(a, argparse._SubParsersAction)).choices
    return {name: [a for a in parser._actions if not shared & set(a.option_strings)]
            for name, parser in commands.items() if name != "run"}


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


def _default(f: Field[Any]) -> Any:
    return f.default_factory() if f.default is MISSING and f.default_factory is not MISSING else f.default


def _shown(value: Any) -> str:
    if value == ():  # the client properties: none by default
        return ""
    text = str(value).lower() if isinstance(value, bool) else str(value)  # a Secret's str is "" or "***"
    return f"`{text}`" if text else ""



if __name__ == "__main__":
    sys.exit(main())
