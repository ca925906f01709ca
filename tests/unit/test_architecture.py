"""The layering rules of docs/architecture.md, checked on the imports of worker/ and producer/.

Each source file is parsed (``ast``, nothing is imported or run) and every
``import`` in it counts, at the top or inside a function alike: a lazy import
still loads its module when the function runs. Imports under
``if TYPE_CHECKING:`` are left out: they are for the type checker only and load
nothing at run time. A relative import is resolved against the file's package.

The rules (one function each, each tried on a deliberate violation in a small
module tree under tmp_path, so that none of them can pass by checking nothing):

- the core (``worker.core``) imports only the core, the standard library, orjson and msgspec;
- the ports (``worker.ports``) import only the core, the standard library and msgspec;
- the loop and its policies (``worker.stream``) import only the core, the ports
  (``worker.ports``), the standard library, msgspec and structlog;
- the adapters (``worker.kafka``, ``worker.dedup``, ``worker.models``, ``worker.formats``, ``worker.tracing``)
  import no job
  (``worker.jobs``);
- the jobs import no entry point (``worker.app``, ``worker.cli``, ``worker.__main__``);
- the producer imports of the worker its core, its Kafka connection code and its registry formats
  only (``worker.core``, ``worker.kafka``, ``worker.formats``), never ``worker.models`` (torch),
  ``worker.stream`` or ``worker.jobs``;
- every part of the worker (each package, and each module at its top) imports of the worker and the producer
  only the parts the table PARTS allows it; a module in no part of the table fails the test, and
  docs/architecture.md shows the same table (``render_parts``);
- no import cycle between modules.
"""

from __future__ import annotations

import ast
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
ROOTS = ("worker", "producer")
STDLIB = frozenset(sys.stdlib_module_names) | {"__future__"}

CORE = "worker.core"
PORTS = "worker.ports"
STREAM = "worker.stream"
JOBS = "worker.jobs"
ADAPTERS = ("worker.kafka", "worker.dedup", "worker.models", "worker.formats", "worker.tracing")
ENTRY_POINTS = ("worker.app", "worker.cli", "worker.__main__")
PRODUCER = "producer"
PRODUCER_MAY_USE = (CORE, "worker.kafka", "worker.formats")
ANY = ("worker", "producer")

# What each part may import of the worker and the producer (besides itself), most depended-on first. The
# composition root and the entry points may import any part; nothing imports them but one another.
PARTS: dict[str, tuple[str, ...]] = {
    "worker.core": (),
    "worker.doc_tables": (),
    "worker.logs": (),
    "worker.ports": (CORE,),
    "worker.signals": (CORE,),
    "worker.stream": (CORE, PORTS),
    "worker.kafka": (CORE, PORTS),
    "worker.dedup": (CORE, PORTS),
    "worker.formats": (CORE, PORTS),
    "worker.tracing": (CORE, PORTS),
    "worker.models": (CORE, PORTS),
    "worker.surface": (CORE, "worker.doc_tables"),
    "worker.compare": (CORE, "worker.kafka"),
    "worker.jobs": (CORE, PORTS, STREAM, "worker.signals"),
    "worker.supervisor": (CORE,),
    PRODUCER: PRODUCER_MAY_USE,
    "worker.app": ANY,
    "worker.cli": ANY,
    "worker.__main__": ANY,
    "worker.inspect_model": ANY,
    "worker.ray_data": ANY,
    "worker.score_file_command": ANY,
    "worker.score_ray_command": ANY,
    "worker.settings_doc": ANY,
    "worker.error_codes_doc": ANY,
    "worker": (),  # the package's own module (its version), not its subpackages
}


@dataclass(frozen=True)
class Import:
    module: str  # the importing module, dotted
    target: str  # the imported module, dotted (``from a import b`` gives ``a.b`` when a.b is a module, else ``a``)
    line: int

    def __str__(self) -> str:
        return f"{self.module}:{self.line} imports {self.target}"


def module_name(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _run_time_nodes(tree: ast.AST) -> list[ast.AST]:
    """Every node, less the bodies of ``if TYPE_CHECKING:`` (their ``else`` branches run, so they count)."""
    nodes: list[ast.AST] = []
    todo = [tree]
    while todo:
        node = todo.pop()
        nodes.append(node)
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            todo.extend(node.orelse)
            continue
        todo.extend(ast.iter_child_nodes(node))
    return nodes


def imports_of(root: Path, path: Path, modules: set[str]) -> list[Import]:
    """The run-time imports of the file at ``path``; ``modules``: every module of the tree (to tell
    ``from package import module`` from ``from module import name``)."""
    name = module_name(root, path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: list[Import] = []
    for node in _run_time_nodes(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.extend(Import(name, alias.name, node.lineno) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            for alias in node.names:
                target = f"{base}.{alias.name}"
                found.append(Import(name, target if target in modules else base, node.lineno))
    return found


def scan(root: Path, roots: tuple[str, ...] = ROOTS) -> list[Import]:
    """Every run-time import of every module under ``root``'s ``roots`` packages."""
    paths = sorted(p for r in roots for p in (root / r).rglob("*.py"))
    modules = {module_name(root, p) for p in paths}
    return [i for p in paths for i in imports_of(root, p, modules)]


def within(name: str, *packages: str) -> bool:
    return any(name == p or name.startswith(p + ".") for p in packages)


def top_level(name: str) -> str:
    return name.partition(".")[0]


# The rules: each returns the imports that break it.

def core_is_pure(imports: list[Import]) -> list[Import]:
    return [i for i in imports if within(i.module, CORE) and not within(i.target, CORE)
            and top_level(i.target) not in STDLIB | {"orjson", "msgspec"}]


def ports_use_core_only(imports: list[Import]) -> list[Import]:
    return [i for i in imports if i.module == PORTS and not within(i.target, CORE)
            and top_level(i.target) not in STDLIB | {"msgspec"}]


def stream_uses_core_and_ports(imports: list[Import]) -> list[Import]:
    return [i for i in imports if within(i.module, STREAM) and not within(i.target, CORE, PORTS, STREAM)
            and top_level(i.target) not in STDLIB | {"msgspec", "structlog"}]


def adapters_import_no_jobs(imports: list[Import]) -> list[Import]:
    return [i for i in imports if within(i.module, *ADAPTERS) and within(i.target, JOBS)]


def jobs_import_no_entry_point(imports: list[Import]) -> list[Import]:
    return [i for i in imports if within(i.module, JOBS) and within(i.target, *ENTRY_POINTS)]


def producer_uses_core_and_kafka(imports: list[Import]) -> list[Import]:
    return [i for i in imports if within(i.module, PRODUCER) and within(i.target, "worker")
            and not within(i.target, *PRODUCER_MAY_USE)]


def part_of(module: str) -> str | None:
    """The part of PARTS that ``module`` belongs to: the longest that names it or a package above it."""
    named = [part for part in PARTS if module == part or (part != "worker" and within(module, part))]
    return max(named, key=len) if named else None


def parts_import_what_the_table_allows(imports: list[Import]) -> list[Import]:
    """Imports of the worker or the producer that the importing module's part may not make, and those of a
    module that is in no part."""
    broken = []
    for i in imports:
        part = part_of(i.module)
        own = part if part != "worker" else "worker.__init__"
        if part is None or (within(i.target, *ANY) and not within(i.target, own, *PARTS[part])):
            broken.append(i)
    return broken


def render_parts() -> str:
    """PARTS as the Markdown table docs/architecture.md shows."""
    rows = ["| part | may import |", "|---|---|"]
    for part, allowed in PARTS.items():
        if part != "worker":
            shown = "any part" if allowed == ANY else ", ".join(f"`{a}`" for a in allowed) or "none"
            rows.append(f"| `{part}` | {shown} |")
    return "\n".join(rows)


def cycles(imports: list[Import]) -> list[list[str]]:
    """The import cycles between the modules scanned (a package counts as its ``__init__``), each once."""
    scanned = {i.module for i in imports}
    edges: dict[str, set[str]] = {}
    for i in imports:
        if i.target in scanned and i.target != i.module and not within(i.module, i.target):
            edges.setdefault(i.module, set()).add(i.target)  # a submodule imports its package first: not a cycle
    found: list[list[str]] = []
    for component in _strongly_connected(scanned, edges):
        if len(component) > 1:
            found.append(sorted(component))
    return sorted(found)


def _strongly_connected(nodes: set[str], edges: dict[str, set[str]]) -> list[set[str]]:
    """Tarjan's algorithm, iteratively."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    components: list[set[str]] = []
    for start in sorted(nodes):
        if start in index:
            continue
        work = [(start, iter(sorted(edges.get(start, ()))))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                components.append(component)
    return components


RULES = [core_is_pure, ports_use_core_only, stream_uses_core_and_ports, adapters_import_no_jobs,
         jobs_import_no_entry_point, producer_uses_core_and_kafka, parts_import_what_the_table_allows]


@pytest.fixture(scope="module")
def repo_imports() -> list[Import]:
    return scan(REPO)


@pytest.mark.parametrize("rule", RULES, ids=lambda rule: rule.__name__)
def test_the_code_keeps_the_rule(repo_imports: list[Import], rule) -> None:
    broken = rule(repo_imports)
    assert not broken, "\n".join(map(str, broken))


def test_the_architecture_page_shows_the_table_of_parts() -> None:
    page = (REPO / "docs" / "architecture.md").read_text(encoding="utf-8")
    assert render_parts() in page, f"docs/architecture.md should show this table:\n{render_parts()}"


def test_no_module_is_part_of_an_import_cycle(repo_imports: list[Import]) -> None:
    assert cycles(repo_imports) == []


def test_the_scan_sees_the_code(repo_imports: list[Import]) -> None:
    """A scan that found nothing would keep every rule."""
    assert {i.target for i in repo_imports if i.module == "worker.stream.loop"} >= {"worker.stream.parts", "structlog"}
    assert "worker.ports" in {i.target for i in repo_imports if i.module == "worker.stream.parts"}
    assert "worker.core.wire" in {i.target for i in repo_imports if i.module == "producer.send"}


# Each rule against a small tree that breaks it (and one that keeps it).

def tree(tmp_path: Path, files: dict[str, str]) -> list[Import]:
    for name, text in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    for directory in {p.parent for p in tmp_path.rglob("*.py")}:
        while directory != tmp_path:
            (directory / "__init__.py").touch()
            directory = directory.parent
    return scan(tmp_path)


@pytest.mark.parametrize("rule, files", [
    (core_is_pure, {"worker/core/batcher.py": "import torch\n"}),
    (core_is_pure, {"worker/core/batcher.py": "from worker.ports import Source\n", "worker/ports.py": ""}),
    (core_is_pure, {"worker/core/clock.py": "def f():\n    import structlog\n"}),  # lazy imports count
    (ports_use_core_only, {"worker/ports.py": "from worker.stream.loop import Worker\n",
                           "worker/stream/loop.py": ""}),
    (stream_uses_core_and_ports, {"worker/stream/loop.py": "from worker.kafka.sink import KafkaSink\n",
                                  "worker/kafka/sink.py": ""}),
    (stream_uses_core_and_ports, {"worker/stream/loop.py": "import redis\n"}),
    (stream_uses_core_and_ports, {"worker/stream/loop.py": "from ..jobs import backfill\n",  # relative
                                  "worker/jobs/backfill.py": ""}),
    (adapters_import_no_jobs, {"worker/kafka/bounded_source.py": "from worker.jobs.bounded_source import B\n",
                               "worker/jobs/bounded_source.py": ""}),
    (adapters_import_no_jobs, {"worker/models/runner.py": "import worker.jobs\n"}),
    (jobs_import_no_entry_point, {"worker/jobs/backfill.py": "from worker.app import build_runner\n",
                                  "worker/app.py": ""}),
    (jobs_import_no_entry_point, {"worker/jobs/batch_file.py": "from worker import cli\n", "worker/cli.py": ""}),
    (producer_uses_core_and_kafka, {"producer/send.py": "def f():\n    from worker.models import load_model\n",
                                    "worker/models/__init__.py": ""}),
    (producer_uses_core_and_kafka, {"producer/client.py": "from worker.stream.loop import Worker\n",
                                    "worker/stream/loop.py": ""}),
    (parts_import_what_the_table_allows, {"worker/models/versions.py": "from worker.stream.served import E\n",
                                          "worker/stream/served.py": ""}),
    (parts_import_what_the_table_allows, {"worker/compare/report.py": "def f():\n    import worker.stream\n"}),
    (parts_import_what_the_table_allows, {"worker/surface/metrics.py": "from worker.kafka import x\n",
                                          "worker/kafka/x.py": ""}),
    (parts_import_what_the_table_allows, {"worker/newpart/thing.py": "from worker.core import wire\n",
                                          "worker/core/wire.py": ""}),  # a part the table lacks
])
def test_a_rule_fails_on_an_import_that_breaks_it(tmp_path: Path, rule, files: dict[str, str]) -> None:
    assert rule(tree(tmp_path, files))


@pytest.mark.parametrize("rule, files", [
    (core_is_pure, {"worker/core/wire.py": "import json\nimport orjson\nfrom worker.core.errors import E\n",
                    "worker/core/errors.py": ""}),
    (stream_uses_core_and_ports, {"worker/stream/loop.py": "import structlog\nfrom worker.ports import Sink\n"
                                                           "from worker.stream.commit import C\n",
                                  "worker/ports.py": "", "worker/stream/commit.py": ""}),
    (stream_uses_core_and_ports, {"worker/stream/loop.py": "from typing import TYPE_CHECKING\n"
                                                           "if TYPE_CHECKING:\n    from worker.kafka import sink\n"}),
    (producer_uses_core_and_kafka, {"producer/send.py": "from worker.core.wire import encode_request\n"
                                                        "from worker.kafka.connection import client_config\n"}),
])
def test_a_rule_passes_what_it_allows(tmp_path: Path, rule, files: dict[str, str]) -> None:
    assert rule(tree(tmp_path, files)) == []


def test_an_import_cycle_is_found_also_through_a_lazy_import(tmp_path: Path) -> None:
    imports = tree(tmp_path, {
        "producer/transport.py": "def open_publisher():\n    from producer.transport_confluent import P\n",
        "producer/transport_confluent.py": "from producer.transport import Record\n",
        "producer/send.py": "from producer.transport import open_publisher\n",
    })
    assert cycles(imports) == [["producer.transport", "producer.transport_confluent"]]


def test_a_submodule_importing_its_package_is_no_cycle(tmp_path: Path) -> None:
    """Python runs a package's ``__init__`` before any of its modules: importing it from one closes no loop."""
    imports = tree(tmp_path, {"worker/models/__init__.py": "from worker.models.base import Servable\n",
                              "worker/models/base.py": "from worker.models import spec\n",
                              "worker/models/spec.py": "import worker.models\n"})
    assert cycles(imports) == []
