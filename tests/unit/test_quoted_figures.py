"""Every measured figure a page quotes is in the results file it links: one figure, one place.

A results file is written by the command that measured it: a file under docs/bench/, docs/chaos/,
docs/interop/ or bench/results/ (git-ignored), or a text file (.txt, .json, .csv) elsewhere under docs/.
The pages (README.md and docs/*.md) quote it with its date and command and link it. This test reads
the pages and the results files they link:

- **Units.** A page is cut into paragraphs, list items and table rows (code blocks and comments left
  out). A unit that links one or more results files is checked against them (a link to a folder: every
  text file in it). A list item or table row that links none takes the results files of the paragraph
  that introduces its list or table: the last paragraph before it under the same heading, when that
  paragraph ends with a colon ("Medians of 5 ([results](bench/x/results.md)):"). A unit that links no
  results file is not checked.
- **Figures.** A figure is a number followed by a unit: µs, ms, s, min, h, req/s, rows/s, records/s, MB,
  MiB, GB, GiB, KB, KiB, TB, %, or × written against the number ("3.1×"; "8 × 2048" is a product).
  Numbers joined by a dash, "to", "and", "or", "against", " / " or ", " before one unit are figures each
  ("9.6–11.1 s", "46 and 62 ms", "9.6 / 16.4 ms"). In a table, a bare number takes the unit its
  column's heading names ("CPU µs a reply", "p50 / p99 at 1,000/s, ms"). Code spans and link targets
  are left out: a flag and its value (`--commit-interval-ms 100`) are a setting, not a figure; a target
  or a setting that must sit in prose beside measured figures is written in words or in a code span.
- **Comparison.** Numbers are compared as values, thousands separators dropped, at the precision the
  page writes: "93" matches 92.5 and "2.3" matches 2.31 (within half the last digit written), "5,900"
  does not match 5,857. A figure matches when any number in any of its unit's results files does.
- **Arithmetic.** A figure computed from the sources (a ratio, a difference) says so right after it,
  with the numbers it comes from: ``1.39× (= 25.0 / 18.0)``, ``4.9 µs (= 11.3 − 6.4)``: a parenthesis
  opening with "=" and holding numbers joined by + - − × * / ÷. Those numbers must be in the sources,
  and the figure must be the expression's value at the page's precision (a % figure: its value or a
  hundred times it).

So a figure that drifted from its source, or one copied from an older run than the one linked, fails
here; to fix it, quote what the linked file holds, link the file that holds it, or drop the figure.
Small integers match some number of almost any file: the check is meant to catch a figure that names
a wrong value (48 µs for 25.0, 5,900 for 5,857), not to prove every number.
"""

from __future__ import annotations

import ast
import operator
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from decimal import Decimal
from functools import cache
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
RESULT_FOLDERS = ("docs/bench", "docs/chaos", "docs/interop", "bench/results")
TEXT_SUFFIXES = {".md", ".json", ".txt", ".csv"}

FENCE = re.compile(r"^ {0,3}(```|~~~).*?^ {0,3}\1", re.MULTILINE | re.DOTALL)
COMMENT = re.compile(r"<!--.*?-->", re.DOTALL)
CODE_SPAN = re.compile(r"(`+)(?!`).+?(?<!`)\1(?!`)", re.DOTALL)
LINK = re.compile(r"(!?)\[((?:[^\]\\]|\\.)*)\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
HEADING = re.compile(r"^ {0,3}#{1,6}\s")
LIST_ITEM = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+")
TABLE_RULE = re.compile(r"^\s*\|?\s*:?-{3,}:?\s*(\|\s*:?-{3,}:?\s*)*\|?\s*$")

NUMBER = r"\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?"
UNIT = r"µs|us|ms|s|min|h|req/s|rows/s|records/s|MiB|MB|GiB|GB|KiB|KB|kB|TB|%|×"
SPACED_UNIT = UNIT.removesuffix("|×")  # "3.1×" is a ratio, "8 × 2048" a product
JOIN = r"\s*[–-]\s*|\s+to\s+|\s+and\s+|\s+or\s+|\s+against\s+|\s+/\s+|,\s+"
FIGURES = re.compile(rf"(?<![\w.,/:#-])((?:{NUMBER})(?:(?:{JOIN})(?:{NUMBER}))*)(\s?(?:{SPACED_UNIT})|×)(?![\w/])"
                     r"(\s*\(=\s*([^()]*)\))?")
BARE_RUN = re.compile(  # numbers (or a run of them) with no unit after them
    rf"(?<![\w.,/:#-])((?:{NUMBER})(?:(?:{JOIN})(?:{NUMBER}))*)(?![\d,.]|\s?(?:{UNIT})(?![\w/]))")
ANY_NUMBER = re.compile(rf"(?<![\d.])(?:{NUMBER})(?![\d])")
OPERATORS: dict[type[ast.operator], Callable[[Decimal, Decimal], Decimal]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv}


@dataclass(frozen=True)
class Unit:
    """A paragraph, list item or table row of a page, and the results files it is checked against."""

    page: Path
    line: int
    text: str
    sources: tuple[Path, ...]


@dataclass(frozen=True)
class Figure:
    number: str
    unit: str
    expression: str | None  # the "(= ...)" after it: computed from the sources, not quoted


def pages() -> list[Path]:
    return [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]


def _shown(path: Path, root: Path = REPO) -> str:
    return str(path.relative_to(root)) if path.is_relative_to(root) else str(path)


def is_result(path: Path, root: Path = REPO) -> bool:
    """Whether ``path`` (resolved) is a results file or a folder of them."""
    if any(path.is_relative_to(root / folder) for folder in RESULT_FOLDERS):
        return True
    return path.is_relative_to(root / "docs") and path.suffix in TEXT_SUFFIXES - {".md"}


def sources_of(text: str, page: Path, root: Path = REPO) -> tuple[Path, ...]:
    """The results files (and folders) ``text`` links, resolved from ``page``'s folder."""
    found = []
    for _, _, target in LINK.findall(CODE_SPAN.sub("", text)):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target) or target.startswith("#"):
            continue
        where = (page.parent / target.partition("#")[0]).resolve()
        if is_result(where, root) and where not in found:
            found.append(where)
    return tuple(found)


def units(page: Path, root: Path = REPO) -> Iterator[Unit]:
    """The paragraphs, list items and table rows of ``page`` with the results files each is checked against."""
    text = FENCE.sub(lambda m: "\n" * m.group().count("\n"), page.read_text(encoding="utf-8"))
    text = COMMENT.sub(lambda m: "\n" * m.group().count("\n"), text)
    blocks: list[tuple[str, int, list[str]]] = []  # (kind, first line, lines): heading, paragraph, item, row
    open_block = False  # whether a line of text continues the paragraph or item above it
    for number, line in enumerate(text.split("\n"), 1):
        stripped = line.strip()
        if HEADING.match(line):
            blocks.append(("heading", number, []))
        elif stripped.startswith("|"):
            if not TABLE_RULE.match(stripped):
                blocks.append(("row", number, [line]))
        elif LIST_ITEM.match(line):
            blocks.append(("item", number, [line]))
        elif stripped and open_block:
            blocks[-1][2].append(line)
        elif stripped:
            blocks.append(("paragraph", number, [line]))
        elif blocks and blocks[-1][0] == "row":
            blocks.append(("blank", number, []))  # the end of a table
        open_block = bool(stripped) and blocks[-1][0] in ("paragraph", "item") and not HEADING.match(line)
    lead: tuple[Path, ...] = ()  # the results files of the paragraph that introduces the lists and tables after it
    header: list[str | None] = []  # the unit each column's heading names, if any
    previous = ""
    for kind, first, lines in blocks:
        body = "\n".join(lines)
        if kind == "heading":
            lead = ()
        elif kind == "paragraph":
            own = sources_of(body, page, root)
            lead = own if body.rstrip().endswith(":") else ()
            yield Unit(page, first, body, own)
        elif kind == "blank":
            pass
        elif kind == "row" and previous != "row":
            header = [_unit_of(cell) for cell in _cells(body)]
        elif kind == "row":
            yield Unit(page, first, _with_units(body, header), sources_of(body, page, root) or lead)
        else:
            yield Unit(page, first, body, sources_of(body, page, root) or lead)
        previous = kind


def _cells(row: str) -> list[str]:
    return re.split(r"(?<!\\)\|", row.strip().strip("|"))


def _unit_of(heading: str) -> str | None:
    """The unit a column's heading names ("CPU µs a reply", "p50 / p99 at 1,000/s, ms"), not one of its
    figures ("p99 at 50 % load")."""
    found = re.search(rf"(?<![\w/])(?<!\d )(?<!\d)({UNIT})(?![\w/])", CODE_SPAN.sub("", heading))
    return found.group(1) if found else None


def _with_units(row: str, header: list[str | None]) -> str:
    """The row with the unit of its column's heading written after each of a cell's bare numbers (or runs of
    them: "9.6 / 16.4")."""
    cells = _cells(row)
    for i, cell in enumerate(cells):
        unit = header[i] if i < len(header) else None
        if unit and not LINK.search(cell):
            written = unit if unit == "×" else f" {unit}"
            cells[i] = BARE_RUN.sub(rf"\g<1>{written}", CODE_SPAN.sub("", cell))
    return "| " + " | ".join(cells) + " |"


def figures(text: str) -> list[Figure]:
    """The figures of a unit's text: numbers followed by a unit, code spans and link targets left out."""
    prose = LINK.sub(lambda m: "" if m.group(1) else m.group(2), CODE_SPAN.sub("", text))
    found = []
    for match in FIGURES.finditer(prose):
        numbers = re.findall(rf"(?<![\d.,])(?:{NUMBER})", match.group(1))
        expression = match.group(4)
        if expression is not None and len(numbers) == 1:
            found.append(Figure(numbers[0], match.group(2).strip(), expression))
        else:
            found += [Figure(n, match.group(2).strip(), None) for n in numbers]
    return found


def value(number: str) -> Decimal:
    return Decimal(number.replace(",", ""))


def matches(quoted: str, source: Decimal) -> bool:
    """Whether ``source`` is ``quoted`` at the precision the page writes it to."""
    exact = value(quoted)
    half = Decimal(1).scaleb(exact.as_tuple().exponent) / 2  # type: ignore[arg-type]
    return abs(source - exact) <= half


@cache
def _numbers(path: Path) -> frozenset[Decimal]:
    files = sorted(p for p in path.rglob("*") if p.suffix in TEXT_SUFFIXES) if path.is_dir() else [path]
    return frozenset(value(n) for f in files
                     for n in ANY_NUMBER.findall(f.read_text(encoding="utf-8", errors="replace")))


def evaluate(expression: str) -> Decimal:
    """The value of ``25.0 / 18.0``, ``11.3 − 6.4 µs``, ``22,192 / 7,218``: numbers (units after them
    dropped) joined by + - − × * / ÷."""
    plain = re.sub(rf"({NUMBER})\s*(?:{UNIT})?(?![\w/])",
                   lambda m: m.group(1).replace(",", ""), expression)
    plain = plain.replace("−", "-").replace("–", "-").replace("×", "*").replace("÷", "/").strip()

    def walk(node: ast.AST) -> Decimal:
        if isinstance(node, ast.Expression):
            return walk(node.body)
        if isinstance(node, ast.BinOp) and type(node.op) in OPERATORS:
            return OPERATORS[type(node.op)](walk(node.left), walk(node.right))
        if isinstance(node, ast.Constant) and isinstance(node.value, int | float):
            return Decimal(ast.get_source_segment(plain, node) or str(node.value))
        raise ValueError(f"not plain arithmetic: {expression!r}")

    return walk(ast.parse(plain, mode="eval"))


def misses(unit: Unit, root: Path = REPO) -> list[str]:
    """Each figure of ``unit`` that none of its results files holds, with the page's line."""
    if not unit.sources:
        return []
    where = f"{_shown(unit.page, root)}:{unit.line}"
    missing = [s for s in unit.sources if not s.exists()]
    if missing:
        return [f"{where}: links {_shown(s, root)}, which does not exist" for s in missing]
    held = set().union(*(_numbers(s) for s in unit.sources))
    named = ", ".join(_shown(s, root) for s in unit.sources)
    found = []
    for figure in figures(unit.text):
        if figure.expression is None:
            if not any(matches(figure.number, n) for n in held):
                found.append(f"{where}: {figure.number} {figure.unit} is in none of {named}")
            continue
        operands = re.findall(rf"(?<![\d.,])(?:{NUMBER})", figure.expression)
        found += [f"{where}: {n} (in the arithmetic of {figure.number} {figure.unit}) is in none of {named}"
                  for n in operands if not any(matches(n, h) for h in held)]
        try:
            result = evaluate(figure.expression)
        except (ValueError, SyntaxError, ArithmeticError):
            found.append(f"{where}: {figure.number} {figure.unit} (= {figure.expression}): not arithmetic")
            continue
        if not any(matches(figure.number, r) for r in (result, result * 100 if figure.unit == "%" else result)):
            found.append(f"{where}: {figure.number} {figure.unit} is not {figure.expression} ({result:.4g})")
    return found


def page_misses(page: Path, root: Path = REPO) -> list[str]:
    return [miss for unit in units(page, root) for miss in misses(unit, root)]


@pytest.mark.parametrize("page", pages(), ids=lambda p: str(p.relative_to(REPO)))
def test_every_figure_a_page_quotes_is_in_the_results_it_links(page: Path):
    assert page_misses(page) == []


# --- the rules, on pages made for them ------------------------------------------------------------------------


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    (tmp_path / "docs" / "bench" / "run").mkdir(parents=True)
    (tmp_path / "docs" / "bench" / "run" / "results.md").write_text(
        "| contender | req/s | CPU µs a reply |\n|---|---:|---:|\n| bare | 111,053 | 5.02 |\n"
        "| streamscore | 26,955 | 25.04 |\n| by hand | 34,310 | 18.0 |\n", encoding="utf-8")
    (tmp_path / "docs" / "bench" / "run" / "results.json").write_text('{"gap_s": [9.61, 11.1]}', encoding="utf-8")
    return tmp_path


def _page(root: Path, text: str) -> Path:
    page = root / "docs" / "page.md"
    page.write_text(text, encoding="utf-8")
    return page


def test_a_figure_the_linked_file_holds_passes(tree: Path):
    page = _page(tree, "# Page\n\nstreamscore spends 25.0 µs a reply at 26,955 req/s, the bare loop 5.0 µs\n"
                       "([results](bench/run/results.md)); the gap was 9.6–11.1 s ([run](bench/run/)).\n")
    assert page_misses(page, tree) == []


def test_a_figure_the_linked_file_does_not_hold_fails(tree: Path):
    page = _page(tree, "# Page\n\nstreamscore spends 48 µs a reply, 25.0 against 18.1 µs by hand,\n"
                       "at 5,900 req/s ([results](bench/run/results.md)).\n\nAbout 48 µs, linking nothing.\n")
    assert page_misses(page, tree) == [
        "docs/page.md:3: 48 µs is in none of docs/bench/run/results.md",
        "docs/page.md:3: 18.1 µs is in none of docs/bench/run/results.md",
        "docs/page.md:3: 5,900 req/s is in none of docs/bench/run/results.md"]


def test_rows_and_items_take_the_results_of_the_paragraph_that_introduces_them(tree: Path):
    page = _page(tree, "# Page\n\nMedians of 5 ([results](bench/run/results.md)):\n\n"
                       "| contender | CPU µs a reply |\n|---|---:|\n| streamscore | 25.0 µs |\n| bare | 6.0 µs |\n\n"
                       "- by hand, 18.0 µs\n- by hand, 19.0 µs\n\nNot introduced ([results](bench/run/results.md)).\n\n"
                       "| unchecked | 77 µs |\n")
    assert page_misses(page, tree) == ["docs/page.md:8: 6.0 µs is in none of docs/bench/run/results.md",
                                       "docs/page.md:11: 19.0 µs is in none of docs/bench/run/results.md"]


def test_arithmetic_on_the_sources_says_so_next_to_its_numbers(tree: Path):
    page = _page(tree, "# Page\n\n1.39× (= 25.04 / 18.0) the job by hand, 7 µs (= 25.0 − 18.0 µs) more, "
                       "20 % (= 5.02 / 25.04) of it; but 1.5× (= 25.0 / 18.0) and 1.39× (= 25.0 / 17.0), and "
                       "4.2× unexplained ([results](bench/run/results.md)).\n")
    assert page_misses(page, tree) == [
        "docs/page.md:3: 1.5 × is not 25.0 / 18.0 (1.389)",
        "docs/page.md:3: 17.0 (in the arithmetic of 1.39 ×) is in none of docs/bench/run/results.md",
        "docs/page.md:3: 1.39 × is not 25.0 / 17.0 (1.471)",
        "docs/page.md:3: 4.2 × is in none of docs/bench/run/results.md"]


def test_code_spans_and_pages_that_link_no_results_are_not_read(tree: Path):
    page = _page(tree, "# Page\n\n`--max-wait-ms 10` and `30 s` ([results](bench/run/results.md)).\n\n"
                       "48 µs, linking [a page](other.md).\n")
    assert page_misses(page, tree) == []


def test_a_link_to_a_missing_results_file_is_named(tree: Path):
    page = _page(tree, "# Page\n\n3 ms ([results](bench/gone/results.md)).\n")
    assert page_misses(page, tree) == ["docs/page.md:3: links docs/bench/gone/results.md, which does not exist"]


@pytest.mark.parametrize("text, found", [
    ("9.6–11.1 s and 28.0-30.7 s", [("9.6", "s"), ("11.1", "s"), ("28.0", "s"), ("30.7", "s")]),
    ("46 and 62 ms against 7 ms", [("46", "ms"), ("62", "ms"), ("7", "ms")]),
    ("p50 / p99 9.6 / 16.4 ms, p50 23 ms, 25/50/90 % load", [("9.6", "ms"), ("16.4", "ms"), ("23", "ms")]),
    ("26,955 req/s, 3.1×, 50 % load, 32 MB, 4 partitions", [("26,955", "req/s"), ("3.1", "×"), ("50", "%"),
                                                            ("32", "MB")]),
    ("an 8 × 2048 × 2048 MLP, 2 x 3 s", [("3", "s")]),
    ("2026-12-02 22:00 UTC, v1.2 s3://x, #19 ms", []),
])
def test_figures(text: str, found: list[tuple[str, str]]):
    assert [(f.number, f.unit) for f in figures(text)] == found


@pytest.mark.parametrize("quoted, source, expected", [
    ("93", "92.5", True), ("2.3", "2.31", True), ("25.0", "25.04", True), ("5,900", "5,857", False),
    ("48", "25.0", False), ("0.72", "0.72", True), ("0.7", "0.76", False),
])
def test_numbers_match_at_the_precision_the_page_writes(quoted: str, source: str, expected: bool):
    assert matches(quoted, value(source)) is expected
