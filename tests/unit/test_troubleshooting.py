"""docs/troubleshooting.md has an entry for every exit code of every command and every error code of the wire
contract, collected from the code (not from a list copied here), so that a new code cannot go undocumented.

Exit codes: each module-level ``EXIT_*`` constant in worker/ and producer/; the integer literals that the
commands' own functions return (the modules worker/cli.py and producer/cli.py take a ``run_*`` function from,
and those two); and 128 + SIGINT, 128 + SIGTERM (worker/signals.py's ``exit_code_of``) for a module that stops
with them (it calls ``exit_if_signalled_while_starting()`` with its default code). Each module's codes belong
to the section of "By exit code" whose text says "Defined in" and names the module's path: a table row there
must start with the code, and name the constant when the code has one.

Error codes: every code of worker/core/wire.py's ERROR_CODES has a row of the "By error code in replies"
table, whose "sent as" cell says how the code is sent as ERROR_CODES declares it; and no row names a code
that is not declared.
"""

from __future__ import annotations

import ast
import re
import signal
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from tests.unit.test_doc_links import FENCE, REPO
from worker.core.wire import ERROR_CODES
from worker.signals import exit_code_of

PAGE = REPO / "docs" / "troubleshooting.md"
PACKAGES = ("worker", "producer")
COMMAND_LINES = (REPO / "worker" / "cli.py", REPO / "producer" / "cli.py")
EXIT_SECTION = "By exit code"
ERROR_SECTION = "By error code in replies"
SIGNAL_CODES = (exit_code_of(signal.SIGINT), exit_code_of(signal.SIGTERM))


# --- the codes, from the code ------------------------------------------------------------------------------


@dataclass(frozen=True)
class ExitCode:
    module: str          # its path from the repository root: worker/jobs/backfill.py
    code: int
    constant: str | None  # EXIT_INTERRUPTED, or None for a literal or a signal's code


def _source(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"))


def _shown(path: Path) -> str:
    return path.relative_to(REPO).as_posix()


def exit_constants(path: Path) -> list[ExitCode]:
    """The module-level ``EXIT_* = <int>`` of a module (tuple assignments too: ``EXIT_A, EXIT_B = 0, 1``)."""
    found = []
    for node in _source(path).body:
        if not isinstance(node, ast.Assign):
            continue
        for target in node.targets:
            names = target.elts if isinstance(target, ast.Tuple) else [target]
            values = node.value.elts if isinstance(node.value, ast.Tuple) else [node.value]
            for name, value in zip(names, values, strict=False):
                if (isinstance(name, ast.Name) and name.id.startswith("EXIT_") and isinstance(value, ast.Constant)
                        and type(value.value) is int):
                    found.append(ExitCode(_shown(path), value.value, name.id))
    return found


def _literals(node: ast.expr) -> list[int]:
    """The integers a returned expression can be: a literal, or either branch of ``a if c else b``."""
    if isinstance(node, ast.IfExp):
        return _literals(node.body) + _literals(node.orelse)
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return [node.value]
    return []


def returned_literals(path: Path) -> list[ExitCode]:
    """The integer literals the functions of a command module return (``return 0``, ``return 1 if x else 0``)."""
    return [ExitCode(_shown(path), code, None)
            for node in ast.walk(_source(path)) if isinstance(node, ast.Return) and node.value is not None
            for code in _literals(node.value)]


def signal_codes(path: Path) -> list[ExitCode]:
    """128 + SIGINT and 128 + SIGTERM, for a module that stops with them while starting."""
    if re.search(r"\bexit_if_signalled_while_starting\(\)", path.read_text(encoding="utf-8")):
        return [ExitCode(_shown(path), code, None) for code in SIGNAL_CODES]
    return []


def command_modules() -> list[Path]:
    """The two command lines, and every module they take a ``run_*`` function from (at any depth: the producer
    imports its demo inside a function)."""
    found = list(COMMAND_LINES)
    for cli in COMMAND_LINES:
        for node in ast.walk(_source(cli)):
            if (isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] in PACKAGES
                    and any(alias.name.startswith("run_") for alias in node.names)):
                path = REPO.joinpath(*node.module.split("."))
                found.append(path.with_suffix(".py") if path.with_suffix(".py").is_file() else path / "__init__.py")
    return sorted(set(found))


def exit_codes() -> dict[str, set[ExitCode]]:
    """Every exit code the code declares or returns, by module."""
    codes: dict[str, set[ExitCode]] = defaultdict(set)
    for package in PACKAGES:
        for path in sorted((REPO / package).rglob("*.py")):
            for code in exit_constants(path):
                codes[code.module].add(code)
    for path in command_modules():
        for code in returned_literals(path) + signal_codes(path):
            codes[code.module].add(code)
    return codes


# --- the page ------------------------------------------------------------------------------------------------


def section(text: str, title: str, level: int = 2) -> str:
    """The part of ``text`` under the heading ``title`` of that level, up to the next heading of that level or
    higher (fenced blocks blanked: a # there is no heading)."""
    text = FENCE.sub(lambda m: "\n" * m.group().count("\n"), text)
    heading = re.search(rf"^{'#' * level} {re.escape(title)}\s*$", text, re.MULTILINE)
    if heading is None:
        return ""
    end = re.compile(rf"^#{{1,{level}}} ", re.MULTILINE).search(text, heading.end())
    return text[heading.end():end.start() if end else len(text)]


def subsections(text: str, level: int = 3) -> list[str]:
    """``text`` cut at each heading of ``level`` (each part starts with its heading; the text before the first
    heading is dropped)."""
    starts = [m.start() for m in re.finditer(rf"^{'#' * level} ", text, re.MULTILINE)]
    return [text[start:end] for start, end in zip(starts, [*starts[1:], len(text)], strict=True)]


def rows(text: str) -> list[list[str]]:
    """The cells of each table row of ``text`` (not the header's separator row); a cell's ``\\|`` stays."""
    found = []
    for line in text.splitlines():
        line = line.strip()
        if not line.startswith("|") or re.fullmatch(r"\|[\s:|-]+\|", line):
            continue
        found.append([cell.strip() for cell in re.split(r"(?<!\\)\|", line.strip("|"))])
    return found


def codes_of(cell: str) -> set[int]:
    """The exit codes a row's first cell names: ``0``, ``130, 143``, ```4```."""
    return {int(number) for number in re.findall(r"\d+", cell.replace("`", ""))} if re.fullmatch(
        r"[`\d,\s]+", cell) else set()


def defined_in(part: str) -> set[str]:
    """The module paths a section's "Defined in ..." sentence names."""
    sentence = re.search(r"Defined in (.*?)(?:\.\s|\.$|$)", part, re.MULTILINE | re.DOTALL)
    return set(re.findall(r"`([\w/.-]+\.py)`", sentence.group(1))) if sentence else set()


def exit_code_misses(text: str, codes: dict[str, set[ExitCode]]) -> list[str]:
    """Each exit code without its row in its module's section of "By exit code"."""
    parts = subsections(section(text, EXIT_SECTION))
    misses = []
    for module, module_codes in sorted(codes.items()):
        owners = [part for part in parts if module in defined_in(part)]
        if not owners:
            misses.append(f"{module}: no section of '{EXIT_SECTION}' says 'Defined in `{module}`'")
            continue
        table = rows(owners[0])
        for code in sorted(module_codes, key=lambda c: (c.code, c.constant or "")):
            matching = [row for row in table if code.code in codes_of(row[0])]
            named = f" ({code.constant})" if code.constant else ""
            if not matching:
                misses.append(f"{module}: exit code {code.code}{named} has no row in its section")
            elif code.constant and not any(f"`{code.constant}`" in " ".join(row) for row in matching):
                misses.append(f"{module}: the row of exit code {code.code} does not name `{code.constant}`")
    return misses


def error_code_misses(text: str) -> list[str]:
    """Each declared error code without its row (or with another "sent as"), and each row of no declared code."""
    table = {row[0].strip("`"): row for row in rows(section(text, ERROR_SECTION)) if re.fullmatch(r"`\w+`", row[0])}
    misses = []
    for code, declared in ERROR_CODES.items():
        row = table.get(code)
        if row is None:
            misses.append(f"error code {code}: no row in '{ERROR_SECTION}'")
        elif len(row) < 2 or row[1] != declared.sent_as.value:
            misses.append(f"error code {code}: sent as {row[1] if len(row) > 1 else None!r} on the page, "
                          f"{declared.sent_as.value!r} in worker/core/wire.py")
    misses += [f"error code {code}: a row on the page, but worker/core/wire.py declares no such code"
               for code in table if code not in ERROR_CODES]
    return misses


# --- the checks ----------------------------------------------------------------------------------------------


def test_every_exit_code_has_a_row():
    assert exit_code_misses(PAGE.read_text(encoding="utf-8"), exit_codes()) == []


def test_every_error_code_has_a_row_saying_how_it_is_sent():
    assert error_code_misses(PAGE.read_text(encoding="utf-8")) == []


# --- the collection finds what it should, and the checks fail when they should -------------------------------


def test_the_codes_are_collected_from_the_modules():
    codes = exit_codes()
    assert ExitCode("worker/cli.py", 4, "EXIT_UNFINISHED") in codes["worker/cli.py"]
    assert ExitCode("worker/cli.py", 143, None) in codes["worker/cli.py"]  # a SIGTERM while starting
    assert ExitCode("worker/jobs/backfill.py", 3, "EXIT_INTERRUPTED") in codes["worker/jobs/backfill.py"]
    assert ExitCode("worker/compare/command.py", 130, "EXIT_INTERRUPTED") in codes["worker/compare/command.py"]
    assert ExitCode("worker/supervisor.py", 1, "EXIT_GAVE_UP") in codes["worker/supervisor.py"]
    assert ExitCode("worker/score_ray_command.py", 130, None) in codes["worker/score_ray_command.py"]
    assert {c.code for c in codes["producer/cli.py"]} == {0, 1, 2}
    assert "producer/demo.py" in codes and "worker/doc_tables.py" not in codes  # a maintainer's tool, no command


def test_a_missing_exit_code_row_or_constant_is_found(tmp_path: Path):
    page = ("# T\n\n## By exit code\n\n### run\n\nDefined in `worker/cli.py`.\n\n| code | constant |\n|---|---|\n"
            "| 0 | `EXIT_OK` |\n| 130, 143 | — |\n| 4 | — |\n\n### other\n\nDefined in `worker/x.py` and `a/b.py`.\n"
            "\n| code |\n|---|\n| 1 |\n\n## By symptom\n\n| 2 | `EXIT_BAD_SETTING` |\n")
    codes = {"worker/cli.py": {ExitCode("worker/cli.py", 0, "EXIT_OK"), ExitCode("worker/cli.py", 143, None),
                               ExitCode("worker/cli.py", 4, "EXIT_UNFINISHED"),
                               ExitCode("worker/cli.py", 2, "EXIT_BAD_SETTING")},
             "a/b.py": {ExitCode("a/b.py", 1, None)},
             "worker/y.py": {ExitCode("worker/y.py", 0, None)}}
    assert exit_code_misses(page, codes) == [
        "worker/cli.py: exit code 2 (EXIT_BAD_SETTING) has no row in its section",  # a row outside it is none
        "worker/cli.py: the row of exit code 4 does not name `EXIT_UNFINISHED`",
        "worker/y.py: no section of 'By exit code' says 'Defined in `worker/y.py`'",
    ]


def test_a_missing_error_code_row_or_another_way_of_sending_is_found():
    text = PAGE.read_text(encoding="utf-8")
    before = set(error_code_misses(text))  # the page's own misses, if any: test_every_error_code_... lists them

    def new_misses(changed: str) -> list[str]:
        return [miss for miss in error_code_misses(changed) if miss not in before]

    first, second = list(ERROR_CODES)[:2]
    dropped = re.sub(rf"^\| `{first}` \|.*\n", "", text, flags=re.MULTILINE)
    assert new_misses(dropped) == [f"error code {first}: no row in '{ERROR_SECTION}'"]
    declared = ERROR_CODES[second].sent_as.value
    changed = text.replace(f"| `{second}` | {declared} |", f"| `{second}` | nowhere |")
    assert new_misses(changed) == [f"error code {second}: sent as 'nowhere' on the page, "
                                   f"{declared!r} in worker/core/wire.py"]
    added = text.replace(f"| `{first}` |", f"| `no_such_code` | dead letter | x | y |\n| `{first}` |", 1)
    assert new_misses(added) == [
        "error code no_such_code: a row on the page, but worker/core/wire.py declares no such code"]
