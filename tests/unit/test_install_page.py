"""docs/install.md agrees with pyproject.toml: its extras table has a row for every extra of
[project.optional-dependencies], and none for an extra that does not exist, each row naming every package
the extra adds; every extra a pip command on the page asks for exists; and every Python version the page
states is requires-python's (its quotation of requires-python, and each "Python X.Y or later")."""

from __future__ import annotations

import re
import tomllib

from tests.unit.test_doc_links import REPO

PAGE = REPO / "docs" / "install.md"
PYPROJECT = REPO / "pyproject.toml"


def project() -> dict:
    return tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))["project"]


def distribution(requirement: str) -> str:
    """The package a requirement names, extras and versions dropped: ``confluent-kafka[avro]>=2.12`` ->
    ``confluent-kafka``."""
    return re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*", requirement.strip()).group()


def extras_table(text: str) -> dict[str, str]:
    """The rows of the table whose first header cell is "extra": the extra's name -> the whole row."""
    found: dict[str, str] = {}
    in_table = False
    for line in text.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")] if line.strip().startswith("|") else []
        if not cells:
            in_table = False
        elif cells[0] == "extra":
            in_table = True
        elif in_table and re.fullmatch(r"`[\w-]+`", cells[0]):
            found[cells[0].strip("`")] = line
    return found


def extra_misses(text: str, extras: dict[str, list[str]]) -> list[str]:
    """Each extra without its row or with a package its row does not name, each row of no extra, and each extra a
    pip command asks for that does not exist."""
    table = extras_table(text)
    misses = []
    for name, requirements in extras.items():
        row = table.get(name)
        if row is None:
            misses.append(f"extra {name}: no row in the extras table of docs/install.md")
            continue
        misses += [f"extra {name}: its row does not name {distribution(r)}" for r in requirements
                   if not re.search(rf"(?<![\w-]){re.escape(distribution(r))}(?![\w-])", row, re.IGNORECASE)]
    misses += [f"extra {name}: a row in docs/install.md, but pyproject.toml has no such extra"
               for name in table if name not in extras]
    for asked in re.findall(r"(?:streamscore|\.)\[([\w,-]+)\]", text):
        misses += [f"pip install ...[{asked}]: pyproject.toml has no extra {name}"
                   for name in asked.split(",") if name not in extras]
    return misses


def python_misses(text: str, requires_python: str) -> list[str]:
    """Each Python version the page states that is not requires-python's minimum; none stated is a miss too."""
    minimum = re.fullmatch(r">=\s*(\d+\.\d+)", requires_python.strip())
    assert minimum, f"requires-python {requires_python!r}: only '>=X.Y' is understood here"
    misses = []
    quoted = re.findall(r'requires-python\s*=\s*"([^"]*)"', text)
    misses += [f'the page quotes requires-python = "{q}", pyproject.toml says "{requires_python}"'
               for q in quoted if q != requires_python]
    stated = re.findall(r"Python (\d+\.\d+) or later", text)
    misses += [f"the page says Python {version} or later, requires-python is {requires_python}"
               for version in stated if version != minimum.group(1)]
    if not quoted and not stated:
        misses.append(f"the page states no Python version (requires-python is {requires_python})")
    return misses


def test_every_extra_has_a_row_naming_what_it_adds():
    assert extra_misses(PAGE.read_text(encoding="utf-8"), project()["optional-dependencies"]) == []


def test_the_python_version_is_requires_python():
    assert python_misses(PAGE.read_text(encoding="utf-8"), project()["requires-python"]) == []


def test_the_checks_fail_when_they_should():
    page = ("Python 3.11 or later (`requires-python = \">=3.11\"`).\n\n| extra | what it adds |\n|---|---|\n"
            "| `formats` | fastavro, protobuf |\n| `gone` | old |\n\n`pip install '.[formats,nope]'`\n")
    extras = {"formats": ["fastavro>=1.9", "protobuf>=5.26", "grpcio-tools>=1.62"], "otel": ["opentelemetry-api"]}
    assert extra_misses(page, extras) == [
        "extra formats: its row does not name grpcio-tools",
        "extra otel: no row in the extras table of docs/install.md",
        "extra gone: a row in docs/install.md, but pyproject.toml has no such extra",
        "pip install ...[formats,nope]: pyproject.toml has no extra nope",
    ]
    assert python_misses(page, ">=3.11") == []
    assert python_misses(page, ">=3.12") == [
        'the page quotes requires-python = ">=3.11", pyproject.toml says ">=3.12"',
        "the page says Python 3.11 or later, requires-python is >=3.12",
    ]
    assert python_misses("Python is needed.", ">=3.11") == [
        "the page states no Python version (requires-python is >=3.11)"]
    assert distribution("confluent-kafka[avro,json,protobuf]>=2.12") == "confluent-kafka"
    assert distribution("kafka-python[crc32c,lz4,snappy,zstd]>=3.0.9") == "kafka-python"
