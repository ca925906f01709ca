"""Every name the README and the docs show resolves: each ``make`` target, each subcommand and flag of
``python -m worker`` and ``python -m producer`` (and of the ``streamscore-*`` scripts), each ``python -m``
module of this repository, each ``from producer import ...`` and ``examples.x.model:build``, each repository
path in a code span, a link's text or the layout tree of docs/architecture.md, and each link named after a
page (it leads to that page); so do pyproject.toml's module references and paths, the Makefile's modules and
paths, and the commands the worker's and the producer's own strings name.

The pages are test_doc_links.py's; the commands are read from fenced blocks (a line ending in ``\\`` goes on
on the next one), code spans, and the lines of the code's strings that start with one. Every miss is listed
with its page and line. Placeholders are understood, not listed: a token in <angle brackets>, [brackets] or
{braces}, or holding "..." or a $VARIABLE, stands for a value (or, first, for any subcommand); a module
that is not ours (``my.module:factory``) is not looked for; and a path under a directory git ignores
(bench/results/, examples/*/build/, ...) is one a command writes, not one of the checkout.
"""

from __future__ import annotations

import argparse
import ast
import fnmatch
import re
import shlex
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest

from tests.unit.test_doc_links import CODE_SPAN, FENCE, HEADING, LINK, REPO, anchors, pages, slug

OUR_PACKAGES = ("worker", "producer", "bench", "tests", "examples", "deploy")
# A repository path: under one of these folders, or, named alone in a code span, one of these top-level files
# (not README.md or Dockerfile: alone, those often mean the page's own folder's, or deploy/docker/'s).
PATH_ROOTS = ("worker", "producer", "bench", "tests", "deploy", "docs", "examples", ".ci")
TOP_LEVEL_FILES = ("Makefile", "pyproject.toml", "setup.py", "setup.cfg", "requirements.txt", "tox.ini",
                   ".gitignore")
REPO_PATH = re.compile(r"(?<![\w.~$/-])(?:\./)?((?:" + "|".join(re.escape(r) for r in PATH_ROOTS) + r")/[^\s`'\"),;]*)")
PYTHON = re.compile(r"^(?:.*/)?python(?:3(?:\.\d+)?)?$|^\$\(PYTHON\)$")
SCRIPTS = {"streamscore-worker": "worker", "streamscore-producer": "producer"}
SEPARATORS = {"&&", "||", "|", "&", ";", "(", ")", "then", "do", "else", "xargs"}
COMMAND_PREFIXES = {"$", "time", "nohup", "exec", "env", "sudo", "command"}
REDIRECT = re.compile(r"\d*(?:>>?|<|&>)(?:&\d+)?|>.*")


# --- where the names are: pages, code spans, fenced blocks, the code's strings -------------------------------


@dataclass(frozen=True)
class Snippet:
    where: str  # page:line
    text: str   # one logical line of code: a code span, a fenced block's line, a string's line


def _shown(page: Path) -> str:
    return str(page.relative_to(REPO)) if page.is_relative_to(REPO) else page.name


def _line(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


def _logical_lines(block: str, first_line: int) -> Iterator[tuple[int, str]]:
    """The lines of a block of shell, a line ending in a backslash joined with the next; comments dropped."""
    pending, start = "", first_line
    for number, line in enumerate(block.split("\n"), first_line):
        if not pending:
            start = number
        line = re.sub(r"(?:^|(?<=\s))#.*", "", line)
        line = line.lstrip() if pending else line
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1].rstrip() + " "
            continue
        yield start, pending + line
        pending = ""
    if pending:
        yield start, pending


def snippets(page: Path) -> list[Snippet]:
    """The code of a page: each logical line of its fenced blocks, and each code span (its newlines spaces)."""
    text = page.read_text(encoding="utf-8")
    shown = _shown(page)
    found = []
    for fence in FENCE.finditer(text):
        body = fence.group().split("\n")[1:-1]  # not the ``` lines
        for number, line in _logical_lines("\n".join(body), _line(text, fence.start()) + 1):
            found.append(Snippet(f"{shown}:{number}", line))
    prose = FENCE.sub(lambda m: "\n" * m.group().count("\n"), text)
    for span in CODE_SPAN.finditer(prose):
        code = " ".join(span.group().strip("`").split())
        found.append(Snippet(f"{shown}:{_line(prose, span.start())}", code))
    return found


def link_texts(page: Path) -> list[Snippet]:
    """The texts of a page's links (outside code), where a repository path is often named: [worker/cli.py](...)."""
    text = page.read_text(encoding="utf-8")
    prose = CODE_SPAN.sub(lambda m: "\n" * m.group().count("\n"),
                          FENCE.sub(lambda m: "\n" * m.group().count("\n"), text))
    shown = _shown(page)
    found = []
    for link in re.finditer(r"!?\[((?:[^\]\\]|\\.)*)\]\(", prose):
        found.append(Snippet(f"{shown}:{_line(prose, link.start())}", link.group(1)))
    return found


def tree_entries(page: Path) -> list[Snippet]:
    """The paths of a layout tree: a fenced block that starts with a folder (``worker/``), its entries two
    spaces deeper than their folder's, names first (several: ``a.py, b.py``), then a description; lines
    deeper than an entry are its description going on."""
    text = page.read_text(encoding="utf-8")
    found = []
    for fence in FENCE.finditer(text):
        lines = fence.group().split("\n")[1:-1]
        if not re.match(r"^[\w.-]+/(\s|$)", next((line for line in lines if line.strip()), "")):
            continue
        folders: list[tuple[int, str]] = []  # (indentation, path) of the folders the next line may be in
        for number, line in enumerate(lines, _line(text, fence.start()) + 1):
            indent = len(line) - len(line.lstrip(" "))
            while folders and folders[-1][0] >= indent:
                folders.pop()
            if indent and (not folders or folders[-1][0] != indent - 2):
                continue  # a description going on
            parent = folders[-1][1] if folders else ""
            names = _tree_names(line)
            found += [Snippet(f"{_shown(page)}:{number}", parent + name) for name in names]
            if len(names) == 1 and names[0].endswith("/"):  # a folder of its own line: its entries follow
                folders.append((indent, parent + names[0]))
    return found


def _tree_names(line: str) -> list[str]:
    """The names of an entry line: the first word of each item of its comma-separated list of names
    (``unit/, component/ (fakes), ...``) before its description (after two spaces) that is a file's name."""
    column = re.split(r"\s{2,}", line.strip(), maxsplit=1)[0]
    items, depth, start = [], 0, 0
    for i, char in enumerate(column):
        depth += {"(": 1, ")": -1}.get(char, 0)
        if char == "," and depth <= 0:
            items.append(column[start:i].strip())
            start, depth = i + 1, 0
    items.append(column[start:].strip())
    words = (item.split(" ", 1)[0] for item in items)
    return [word for word in words if re.fullmatch(r"[\w.-]+/|[\w-]+(?:\.\w+)+", word)]  # not "adapter),"


def source_snippets(root: Path) -> list[Snippet]:
    """The code a package's strings show: their code spans (`...` or ``...``), and each line that starts with a
    command (an epilog's examples). An f-string's replacement fields read as the placeholder <value>."""
    found = []
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        shown = path.relative_to(root.parent)
        parts = {id(part) for node in ast.walk(tree) if isinstance(node, ast.JoinedStr) for part in node.values}
        for node in ast.walk(tree):
            text = None if id(node) in parts else _string_of(node)
            if text is None or not re.search(r"python -m|streamscore-|make ", text):
                continue
            for span in CODE_SPAN.finditer(text):
                found.append(Snippet(f"{shown}:{node.lineno - 1 + _line(text, span.start())}",
                                     " ".join(span.group().strip("`").split())))
            rest = CODE_SPAN.sub(lambda m: "\n" * m.group().count("\n"), text)
            for number, line in _logical_lines(rest, node.lineno):
                if re.match(r"\s*(?:\$ )?(?:\S*python\S* -m |streamscore-\w+ |make )", line):
                    found.append(Snippet(f"{shown}:{number}", line.strip()))
    return sorted(found, key=lambda snippet: (snippet.where.split(":")[0], int(snippet.where.split(":")[1])))


def _string_of(node: ast.AST) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(part.value if isinstance(part, ast.Constant) else "<value>" for part in node.values)
    return None


# --- commands in a line of code ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Command:
    program: str       # "make", or "module": python -m (or a script of pyproject's) of any module
    module: str        # for "module": the module's name (worker for streamscore-worker)
    args: list[str]


def tokens(line: str) -> list[str]:
    try:
        words = shlex.split(line, posix=True)
    except ValueError:  # an unbalanced quote: a fragment
        words = line.split()
    split = []
    for word in words:  # "a;", "(cd", "x)" as shell separates them; not "$(PYTHON)"
        if word.startswith("(") and word not in ("(", "()"):
            split.append("(")
            word = word[1:]
        if word.endswith((";", ")")) and word not in (";", ")") and word.count(")") > word.count("("):
            split += [word.rstrip(";)"), ";"]
        elif word:
            split.append(word)
    return split


def commands(line: str) -> list[Command]:
    """The commands of a shell line: ``make`` where a command starts, ``python -m`` anywhere."""
    words = tokens(line)
    found = []
    at_start = True
    for i, word in enumerate(words):
        if word in SEPARATORS:
            at_start = True
            continue
        if at_start and (word in COMMAND_PREFIXES or re.match(r"^[A-Za-z_]\w*=", word)):
            continue
        if PYTHON.match(word) and words[i + 1:i + 2] == ["-m"] and i + 2 < len(words):
            module, ends = _unpunctuated(words[i + 2])
            found.append(Command("module", module, [] if ends else _until_separator(words[i + 3:])))
        elif at_start and word == "make":
            found.append(Command("make", "", _until_separator(words[i + 1:])))
        elif at_start and word in SCRIPTS:
            found.append(Command("module", SCRIPTS[word], _until_separator(words[i + 1:])))
        at_start = False
    return found


def _until_separator(words: list[str]) -> list[str]:
    args = []
    for word in words:
        if word in SEPARATORS or REDIRECT.fullmatch(word):
            break
        word, ends = _unpunctuated(word)
        args.append(word)
        if ends:
            break
    return args


def _unpunctuated(word: str) -> tuple[str, bool]:
    """A word without the punctuation of the prose around a command (`score-file:`, `tests.chaos),`), and
    whether it had some: the command ends there."""
    if is_placeholder(word):
        return word, False
    bare = re.sub(r"(?<=[\w\]>}/])[:,;.)]+$", "", word)
    return bare, bare != word


def is_placeholder(word: str) -> bool:
    """<topic>, [flags], {name}, ..., $VARIABLE stand for a value (or, first, any subcommand), not a name."""
    return bool(re.search(r"^[<\[{].*[>\]}]$|\.\.\.|…|\$", word)) or "<value>" in word


# --- what exists: make targets, modules, the CLIs' parsers ---------------------------------------------------


@cache
def make_targets() -> frozenset[str]:
    text = (REPO / "Makefile").read_text(encoding="utf-8")
    return frozenset(re.findall(r"^([A-Za-z][\w.-]*)\s*:(?!=)", text, re.MULTILINE))


def module_missing(name: str) -> str | None:
    """Why ``python -m name`` cannot run from the repository root, or None: no such module, or a package
    without a __main__."""
    path = REPO.joinpath(*name.split("."))
    if path.with_suffix(".py").is_file():
        return None
    if path.is_dir():
        return None if (path / "__main__.py").is_file() else f"package {name} has no __main__.py"
    return f"no module {name}"


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _options(parser: argparse.ArgumentParser) -> dict[str, bool]:
    """A parser's option strings, each with whether it takes a value."""
    return {option: action.nargs != 0 for action in parser._actions for option in action.option_strings}


@dataclass(frozen=True)
class Cli:
    top: dict[str, bool]
    commands: dict[str, dict[str, bool]]
    default: str | None  # the subcommand run when none is named (the worker's run)


@cache
def clis() -> dict[str, Cli]:
    """The worker's and the producer's command lines, built as worker/cli.py and producer/cli.py build them."""
    from producer.cli import _parser as producer_parser
    from worker.cli import COMMANDS
    from worker.cli import _parser as worker_parser

    built = {}
    for name, parser, default in (("worker", worker_parser(), "run"), ("producer", producer_parser(), None)):
        subs = {sub: _options(p) for sub, p in _subcommands(parser).items()}
        built[name] = Cli(_options(parser), subs, default)
    assert set(built["worker"].commands) == set(COMMANDS)
    return built


def cli_misses(program: str, args: list[str], message: bool = False) -> list[str]:
    """What is wrong in ``python -m program args``: a subcommand it does not have, a flag that subcommand (or,
    before it, the top-level parser) does not take; in a message of the code (``message``), a pointer to the
    top-level help where that help lists no flags (the worker's: its settings are under `run --help`)."""
    cli = clis()[program]
    words = args[:args.index("--")] if "--" in args else list(args)  # after --: another program's arguments
    if message and words[:1] in (["--help"], ["-h"]) and not set(cli.top) - {"-h", "--help"}:
        return [f"`python -m {program} {words[0]}` lists only the subcommands, no flags: name the subcommand's "
                f"help (`python -m {program} {cli.default or '<subcommand>'} --help`)"]
    if cli.default and (not words or words[0] not in (*cli.commands, "-h", "--help")):
        if words and not words[0].startswith("-") and not is_placeholder(words[0]):
            # worker/cli.py runs `run` with these arguments, and argparse refuses the word
            return [f"`python -m {program} {words[0]}`: no such subcommand (it has {', '.join(cli.commands)})"]
        words = [cli.default, *words]
    return _flag_misses(program, cli, words)


def _flag_misses(program: str, cli: Cli, words: list[str]) -> list[str]:
    """The subcommand of ``words`` (the first word no flag or flag's value), and each flag it does not take."""
    misses: list[str] = []
    command, allowed, i = None, cli.top, 0
    while i < len(words):
        word = words[i]
        if command is None and not word.startswith("-"):
            if is_placeholder(word):  # any subcommand: a flag of any of them
                command = word
                allowed = {flag: value for flags in cli.commands.values() for flag, value in flags.items()}
            elif word in cli.commands:
                command, allowed = word, cli.commands[word]
            else:
                misses.append(f"`python -m {program} {word}`: no such subcommand (it has {', '.join(cli.commands)})")
                return misses
        elif re.fullmatch(r"--?[A-Za-z][\w-]*(=.*)?", word):
            flag = word.split("=", 1)[0]
            if flag not in allowed:
                where = f"`python -m {program}{' ' + command if command else ''}`"
                misses.append(f"{where} has no flag {flag}")
            elif command is None and allowed[flag] and "=" not in word:
                i += 1  # the top-level flag's value is not the subcommand
        i += 1
    return misses


def _alternatives(args: list[str]) -> list[list[str]]:
    """``send|score|demo --kafka-client x``: each alternative's arguments (the first word with a | only)."""
    for i, word in enumerate(args):
        if "|" in word.strip("|") and not is_placeholder(word):
            return [[*args[:i], choice, *args[i + 1:]] for choice in word.split("|")]
    return [args]


def command_misses(line: str, message: bool = False) -> list[str]:
    """What is wrong with the commands of a line (see cli_misses for ``message``), and with its imports."""
    misses = import_misses(line) + factory_misses(line)
    for command in commands(line):
        if command.program == "make":
            for word in (choice for arg in command.args for choice in arg.split("|")):
                if word.startswith("-") or "=" in word or is_placeholder(word):
                    continue
                if word not in make_targets():
                    misses.append(f"`make {word}`: the Makefile has no target {word}")
            continue
        module = command.module
        if is_placeholder(module) or module.split(".")[0] not in OUR_PACKAGES:
            continue
        missing = module_missing(module)
        if missing:
            misses.append(f"`python -m {module}`: {missing}")
        elif module in ("worker", "producer"):
            for args in _alternatives(command.args):
                misses += [miss for miss in cli_misses(module, args, message) if miss not in misses]
    return misses


IMPORT = re.compile(r"^\s*(?:from\s+([\w.]+)\s+import\s+\(?([\w\s,]+?)\)?|import\s+([\w.]+)(?:\s+as\s+\w+)?)\s*$")


def import_misses(line: str) -> list[str]:
    """``from producer import ScoringClient``: the module exists and has the names (defines or imports them)."""
    found = IMPORT.match(line)
    if not found:
        return []
    module = found.group(1) or found.group(3)
    if module.split(".")[0] not in OUR_PACKAGES:
        return []
    names = [re.sub(r"\s+as\s+\w+$", "", name.strip()) for name in (found.group(2) or "").split(",")]
    misses = []
    for name in [name for name in names if name] or [""]:
        misses += [f"`{line.strip()}`: {miss}" for miss in _object_misses(module, name) if miss not in misses]
    return misses


FACTORY = re.compile(r"(?<![\w.:/])((?:" + "|".join(OUR_PACKAGES) + r")(?:\.\w+)+):(\w+)\b")


def factory_misses(text: str) -> list[str]:
    """``examples.churn_tabular.model:build`` (a --model factory, an entry point): the module defines the name.
    A placeholder such as ``my.module:factory`` is no module of ours, and not looked for."""
    return [f"`{module}:{name}`: {miss}" for module, name in FACTORY.findall(text)
            for miss in _object_misses(module, name)]


# --- repository paths ----------------------------------------------------------------------------------------


@cache
def ignored_patterns() -> tuple[str, ...]:
    lines = (REPO / ".gitignore").read_text(encoding="utf-8").splitlines()
    return tuple(line.strip().rstrip("/") for line in lines if line.strip() and not line.startswith(("#", "!")))


def is_ignored(path: str) -> bool:
    """Whether git ignores the path or a folder above it: a file a command writes, not one of the checkout."""
    parts = path.strip("/").split("/")
    for end in range(1, len(parts) + 1):
        prefix = "/".join(parts[:end])
        for pattern in ignored_patterns():
            if fnmatch.fnmatchcase(prefix if "/" in pattern else parts[end - 1], pattern.lstrip("/")):
                return True
    return False


def path_miss(reference: str, base: Path = REPO) -> str | None:
    """Why a repository path (with an optional :line or ::test) does not resolve from ``base``, or None."""
    path, _, test = reference.partition("::")
    path = re.sub(r":\d+(?:-\d+)?$", "", path)
    path, _, anchor = path.partition("#")
    path = path.rstrip(".:")  # the end of a sentence
    if not path or is_ignored(path) or re.search(r"[*?{}<>$]|\.\.\.|…", path) or re.search(r"[*?{}<>]", test):
        return None
    target = base / path
    if not target.exists():
        return f"{path}: no such file or folder"
    if path.endswith("/") and not target.is_dir():
        return f"{path}: not a folder"
    if anchor and target.suffix == ".md" and anchor not in anchors(target):
        return f"{path}#{anchor}: no heading with that anchor"
    if test and target.suffix == ".py":
        source = target.read_text(encoding="utf-8")
        for name in re.sub(r"\[.*", "", test).split("::"):
            if not re.search(rf"^\s*(?:async\s+)?(?:def|class)\s+{re.escape(name)}\b", source, re.MULTILINE):
                return f"{path}::{test}: no test or class {name} there"
    return None


def path_misses(text: str, page: Path | None = None) -> list[str]:
    """The repository paths in ``text`` that do not resolve: from the repository's root, or (a link's text,
    [bench/history.md](bench/history.md) on a page of docs/) from the folder of ``page``."""
    found = [m.group(1) for m in REPO_PATH.finditer(text)]
    whole = text.strip()
    if re.sub(r":\d+$", "", whole) in TOP_LEVEL_FILES:  # a top-level file named alone: `pyproject.toml`
        found.append(whole)
    misses = []
    for reference in found:
        miss = path_miss(reference)
        if miss and (page is None or path_miss(reference, page.parent)):
            misses.append(miss)
    return misses


# --- pointers: a link named after a page leads to that page ---------------------------------------------------


@cache
def titles() -> dict[Path, str]:
    """Each page's title, its first level-1 heading, without code marks."""
    found = {}
    for page in pages():
        for level, heading in HEADING.findall(FENCE.sub("", page.read_text(encoding="utf-8"))):
            if level == "#":
                found[page.resolve()] = heading.replace("`", "")
                break
    return found


def pointer_misses(page: Path) -> list[str]:
    """Links whose text is a page's title, or its start (``[Operations](...)``, ``[Several models](...)``),
    that lead to another page; unless they lead to a heading of the same words (``[Bring your own
    model](#bring-your-own-model)``)."""
    prose = CODE_SPAN.sub(lambda m: "\n" * m.group().count("\n") if "\n" in m.group() else m.group().replace("`", ""),
                          FENCE.sub(lambda m: "\n" * m.group().count("\n"), page.read_text(encoding="utf-8")))
    misses = []
    for link in re.finditer(LINK, prose):
        text = re.match(r"!?\[((?:[^\]\\]|\\.)*)\]", link.group()).group(1).strip()
        target = link.group(1)
        named = [p for p, title in titles().items() if text and re.match(re.escape(text) + r"(?![\w-])", title, re.I)]
        if not named or re.match(r"^[a-z][a-z0-9+.-]*:", target):
            continue
        path, _, anchor = target.partition("#")
        where = (page.parent / path).resolve() if path else page.resolve()
        if where not in named and not anchor.startswith(slug(text)):
            pages_named = ", ".join(_shown(p) for p in named)
            misses.append(f"{_shown(page)}:{_line(prose, link.start())}: [{text}]({target}) leads to "
                          f"{_shown(where)}, but {pages_named} is the page of that title")
    return misses


# --- the checks ----------------------------------------------------------------------------------------------


def page_misses(page: Path) -> list[str]:
    misses = []
    for snippet in snippets(page):
        misses += [f"{snippet.where}: {miss}" for miss in command_misses(snippet.text) + path_misses(snippet.text)]
    for entry in tree_entries(page):
        if miss := path_miss(entry.text):
            misses.append(f"{entry.where}: in the layout, {miss}")
    for snippet in link_texts(page):
        misses += [f"{snippet.where}: {miss}" for miss in path_misses(snippet.text, page)]
    return misses + pointer_misses(page)


@pytest.mark.parametrize("page", pages(), ids=lambda p: str(p.relative_to(REPO)))
def test_every_command_and_path_a_page_shows_exists(page: Path):
    assert page_misses(page) == []


@pytest.mark.parametrize("package", ["worker", "producer"])
def test_every_command_the_code_names_exists(package: str):
    misses = []
    for snippet in source_snippets(REPO / package):
        misses += [f"{snippet.where}: {miss}"
                   for miss in command_misses(snippet.text, message=True) + path_misses(snippet.text)]
    assert misses == []


def test_every_command_and_path_the_makefile_names_exists():
    text = (REPO / "Makefile").read_text(encoding="utf-8")
    misses = []
    for number, line in _logical_lines(text, 1):
        misses += [f"Makefile:{number}: {miss}" for miss in command_misses(line) + path_misses(line)]
    assert misses == []


def pyproject_misses() -> list[str]:
    """pyproject.toml's references: the scripts' entry points, the packages setuptools finds, pytest's test
    paths, mypy's packages, ruff's immutable calls and first-party names, and the repository paths its
    comments and strings name."""
    text = (REPO / "pyproject.toml").read_text(encoding="utf-8")
    config = tomllib.loads(text)
    misses = []
    for script, entry in config["project"].get("scripts", {}).items():
        module, _, attribute = entry.partition(":")
        misses += [f"[project.scripts] {script}: {miss}" for miss in _object_misses(module, attribute)]
    tool = config.get("tool", {})
    for pattern in tool.get("setuptools", {}).get("packages", {}).get("find", {}).get("include", []):
        if not any(fnmatch.fnmatchcase(p.name, pattern) for p in REPO.iterdir() if (p / "__init__.py").is_file()):
            misses.append(f"[tool.setuptools.packages.find] include {pattern!r}: matches no package")
    for path in tool.get("pytest", {}).get("ini_options", {}).get("testpaths", []):
        if not (REPO / path).exists():
            misses.append(f"[tool.pytest.ini_options] testpaths: no {path}")
    for package in tool.get("mypy", {}).get("packages", []):
        if not (REPO / package / "__init__.py").is_file():
            misses.append(f"[tool.mypy] packages: no package {package}")
    for call in tool.get("ruff", {}).get("lint", {}).get("flake8-bugbear", {}).get("extend-immutable-calls", []):
        module, _, attribute = call.rpartition(".")
        misses += [f"[tool.ruff] extend-immutable-calls {call}: {miss}" for miss in _object_misses(module, attribute)]
    for name in tool.get("ruff", {}).get("lint", {}).get("isort", {}).get("known-first-party", []):
        if not (REPO / name).is_dir():
            misses.append(f"[tool.ruff.lint.isort] known-first-party: no {name}/")
    for number, line in enumerate(text.splitlines(), 1):
        misses += [f"pyproject.toml:{number}: {miss}" for miss in path_misses(line)]
    return misses


def _object_misses(module: str, attribute: str) -> list[str]:
    """Whether ``module`` exists and defines, imports or holds as a submodule ``attribute`` (if any)."""
    path = REPO.joinpath(*module.split("."))
    source = path.with_suffix(".py") if path.with_suffix(".py").is_file() else path / "__init__.py"
    if not source.is_file():
        return [f"no module {module}"]
    if attribute and ((path / f"{attribute}.py").is_file() or (path / attribute / "__init__.py").is_file()):
        return []
    tree = ast.parse(source.read_text(encoding="utf-8"))
    defined = {node.name for node in tree.body if isinstance(node, (ast.FunctionDef, ast.ClassDef))}
    defined |= {target.id for node in tree.body if isinstance(node, (ast.Assign, ast.AnnAssign))
                for target in (node.targets if isinstance(node, ast.Assign) else [node.target])
                if isinstance(target, ast.Name)}
    defined |= {alias.asname or alias.name for node in tree.body if isinstance(node, ast.ImportFrom)
                for alias in node.names}
    return [] if not attribute or attribute in defined else [f"{module} defines no {attribute}"]


def test_pyproject_names_modules_and_paths_that_exist():
    assert pyproject_misses() == []


# --- the checker finds what it should, and only that ---------------------------------------------------------


def test_the_commands_of_a_line_are_found():
    line = 'eval "$(deploy/local/services.sh up)" && CHAOS_SIZE=small make chaos; .venv/bin/python -m worker --x 1'
    assert commands(line) == [Command("make", "", ["chaos"]), Command("module", "worker", ["--x", "1"])]
    assert commands("python -m worker compare --input a.jsonl --json > report.json") == [
        Command("module", "worker", ["compare", "--input", "a.jsonl", "--json"])]
    assert commands("to make sure the topic exists") == []  # make where no command starts
    assert commands("(cd build && streamscore-producer demo)") == [Command("module", "producer", ["demo"])]


@pytest.mark.parametrize("line, misses", [
    ("python -m worker --requests-topic r --model churn", []),  # no subcommand: run
    ("python -m worker run --help", []),
    ("python -m worker --help", []),
    ("python -m worker score-file a.jsonl b.jsonl --model my.module:factory --weights w.pt", []),
    ("python -m worker <command> --model churn", []),  # any subcommand: a flag of any
    ("python -m worker ... --processes 4", []),
    ("python -m worker --requests-topic r -- --whatever", []),  # after --: not the worker's
    ("python -m worker scorefile a b", ["`python -m worker scorefile`: no such subcommand (it has run, score-file, "
                                        "score-ray, backfill, inspect-model, compare)"]),
    ("python -m worker --requests-topic r --max-batchsize 8 --nope",
     ["`python -m worker run` has no flag --max-batchsize", "`python -m worker run` has no flag --nope"]),
    ("python -m worker compare --shadow-topic t --max-batch-size 8",
     ["`python -m worker compare` has no flag --max-batch-size"]),
    ("python -m producer --bootstrap-servers h:9092 send requests --file r.jsonl", []),
    ("python -m producer send requests --file r.jsonl --bootstrap-servers h:9092",
     ["`python -m producer send` has no flag --bootstrap-servers"]),  # the top-level flag goes first
    ("python -m producer sendd requests", ["`python -m producer sendd`: no such subcommand (it has send, collect, "
                                           "score, create-topic, demo)"]),
    ("python -m worker.settings_doc --check", []),
    ("python -m worker.nothing_here", ["`python -m worker.nothing_here`: no module worker.nothing_here"]),
    ("python -m worker.core", ["`python -m worker.core`: package worker.core has no __main__.py"]),
    ("python -m pytest tests/unit -q", []),  # not ours
    ("make test-unit lint CLUSTER=1 && make nothing", ["`make nothing`: the Makefile has no target nothing"]),
    ("python -m producer send|score|demo --kafka-client confluent", []),  # each alternative
    ("python -m producer send|collect --kafka-client confluent", ["`python -m producer collect` has no flag "
                                                                  "--kafka-client"]),
    ("python -m worker score-file: its parser, run and reports", []),  # prose after the command
    ("chaos/ (python -m tests.chaos), secure/", []),
    ("from producer import ScoringClient, AsyncScoringClient", []),
    ("from producer import ScoringClient, Nothing", ["`from producer import ScoringClient, Nothing`: producer "
                                                     "defines no Nothing"]),
    ("python -m worker run --model examples.churn_tabular.model:build --weights w.pt", []),
    ("python -m worker run --model examples.churn_tabular.model:nothing", [
        "`examples.churn_tabular.model:nothing`: examples.churn_tabular.model defines no nothing"]),
])
def test_command_misses(line: str, misses: list[str]):
    assert command_misses(line) == misses


def test_a_message_of_the_code_names_the_help_that_lists_the_flags():
    assert command_misses("python -m worker run --help", message=True) == []
    assert command_misses("python -m producer --help", message=True) == []  # it has flags of its own
    assert command_misses("python -m worker --help", message=True) == [
        "`python -m worker --help` lists only the subcommands, no flags: name the subcommand's help "
        "(`python -m worker run --help`)"]


def test_the_strings_of_the_code_are_read_as_messages_and_examples(tmp_path: Path):
    package = tmp_path / "package"
    package.mkdir()
    (package / "messages.py").write_text(
        'EPILOG = """examples:\n  python -m worker --requests-topic r \\\\\n      --nope 1\n"""\n'
        'def fail(name):\n    raise ValueError(f"unknown setting {name}; see `python -m worker --help`")\n',
        encoding="utf-8")
    found = [(s.where, s.text) for s in source_snippets(package)]
    assert found == [("package/messages.py:2", "python -m worker --requests-topic r --nope 1"),
                     ("package/messages.py:6", "python -m worker --help")]
    assert [miss for snippet in source_snippets(package) for miss in command_misses(snippet.text, message=True)] == [
        "`python -m worker run` has no flag --nope", "`python -m worker --help` lists only the subcommands, no flags: "
        "name the subcommand's help (`python -m worker run --help`)"]


@pytest.mark.parametrize("text, misses", [
    ("worker/cli.py", []),
    ("worker/cli.py:12", []),
    ("tests/unit/test_doc_links.py::test_every_link_resolves", []),
    ("tests/unit/test_doc_links.py::test_nothing_like_this", [
        "tests/unit/test_doc_links.py::test_nothing_like_this: no test or class test_nothing_like_this there"]),
    ("pytest tests/unit/test_doc_links.py -q", []),
    ("see worker/nowhere.py and docs/none/", ["worker/nowhere.py: no such file or folder",
                                              "docs/none/: no such file or folder"]),
    ("docs/fleet.md#no-such-heading", ["docs/fleet.md#no-such-heading: no heading with that anchor"]),
    ("bench/results/latest/report.md", []),  # ignored by git: a run writes it
    ("docs/bench/tail-<date>/results.md", []),  # a placeholder
    ("deploy/**/*.yaml", []),  # a glob
    ("pyproject.toml", []),
    ("setup.py", ["setup.py: no such file or folder"]),
    (".venv/bin/python", []),
    ("~/.cache/streamscore/wheels", []),
])
def test_path_misses(text: str, misses: list[str]):
    assert path_misses(text) == misses


def test_a_layout_tree_is_read_as_paths(tmp_path: Path):
    page = tmp_path / "page.md"
    page.write_text("# Layout\n\n```\nworker/\n  cli.py             python -m worker: run | score-file\n"
                    "  core/              pure\n    batcher.py         size / wait batching, and a description\n"
                    "                       going on: not.py\n    gone.py            not there\n"
                    "  stream/\n    loop.py\ntests/\n  unit/, component/ (fakes, one harness), nothing/\n```\n",
                    encoding="utf-8")
    assert [entry.text for entry in tree_entries(page)] == [
        "worker/", "worker/cli.py", "worker/core/", "worker/core/batcher.py", "worker/core/gone.py",
        "worker/stream/", "worker/stream/loop.py", "tests/", "tests/unit/", "tests/component/", "tests/nothing/"]
    assert page_misses(page) == ["page.md:9: in the layout, worker/core/gone.py: no such file or folder",
                                 "page.md:13: in the layout, tests/nothing/: no such file or folder"]


def test_a_link_named_after_a_page_leads_to_it(tmp_path: Path):
    page = tmp_path / "page.md"
    docs = "../" * len(tmp_path.relative_to(tmp_path.anchor).parts) + str(REPO.relative_to(REPO.anchor)) + "/docs"
    page.write_text(f"# Page\n\n[Configuration]({docs}/configuration.md) [Operations]({docs}/operations.md#logs)"
                    f"\n[Operations]({docs}/configuration.md) [the run]({docs}/configuration.md)\n"
                    "[Operations](#operations-of-this-page)\n\n## Operations of this page\n", encoding="utf-8")
    assert pointer_misses(page) == [f"page.md:4: [Operations]({docs}/configuration.md) leads to "
                                    "docs/configuration.md, but docs/operations.md is the page of that title"]


def test_every_miss_of_a_page_is_listed_with_its_line(tmp_path: Path):
    page = tmp_path / "page.md"
    page.write_text("# Page\n\nRun `make nothing` and `python -m worker --nope`.\n\n```sh\nmake demo\n"
                    "python -m producer send requests \\\n    --file r.jsonl --rate 5 --nope\n```\n"
                    "[worker/gone.py](../worker/gone.py)\n", encoding="utf-8")
    assert page_misses(page) == [
        "page.md:7: `python -m producer send` has no flag --nope",
        "page.md:3: `make nothing`: the Makefile has no target nothing",
        "page.md:3: `python -m worker run` has no flag --nope",
        "page.md:10: worker/gone.py: no such file or folder",
    ]
