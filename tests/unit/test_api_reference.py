"""The API reference (docs/reference/*.md) covers the public Python surface, and that surface has docstrings.

Public: every name in ``producer.__all__``, and the names of PUBLIC below, each with why it is public. Each
must have a ``::: module.Name`` directive on a reference page, and each directive must name one of them, so
the pages and this list agree. mkdocstrings renders a docstring and hides what has none: so each covered
class and function needs its own docstring (not an inherited one, nor the signature a dataclass writes in its
place), and so does each public method and property a covered class defines.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import re
from pathlib import Path
from typing import Any

import pytest

import producer
from tests.unit.test_doc_links import REPO

REFERENCE = REPO / "docs" / "reference"
DIRECTIVE = re.compile(r"^:::[ \t]+([\w.]+)[ \t]*$", re.MULTILINE)

# The public names beyond producer.__all__, and why each is public: what the docs and examples show users
# importing, and what those names take, return or raise. Everything else in worker and producer is internal.
PUBLIC: dict[str, str] = {
    "producer.send.send_requests": "bulk sending from Python: docs/formats.md shows it with request_encoder",
    "producer.send.requests_from_file": "reads the request files send_requests takes (JSONL, CSV, Parquet)",
    "producer.send.SendSummary": "what send_requests returns",
    "producer.send.BadLine": "the unreadable lines requests_from_file yields and send_requests skips",
    "producer.topics.create_topics": "creates the requests and reply topics; the examples call it",
    "worker.core.kafka_properties.KafkaProperties": "ScoringClient's properties argument; docs/interop.md shows it",
    "worker.core.formats.Formats": "ScoringClient's formats argument; docs/formats.md shows Formats.from_sources()",
    "worker.formats.requests.request_encoder": "send_requests' registry-framed encode; docs/formats.md shows it",
    "worker.models.base.Servable": "the protocol a user's model factory returns (docs/models.md)",
    "worker.models.spec.ModelInput": "what a Servable's collate returns for a forward of several tensors",
    "worker.models.spec.Outputs": "the declared outputs a Servable's split may use; an example imports it",
    "worker.ray_data.ScoreBatches": "the Ray Data step docs/batch-jobs.md shows",
    "worker.ray_data.scoring_settings": "the settings ScoreBatches takes; docs/batch-jobs.md shows it",
    "worker.jobs.datasets.dataset_files": "lists a dataset's files for Ray Data; docs/batch-jobs.md names it",
    "worker.app.build_one_model": "the only way to the runner score_table and score_file take",
    "worker.jobs.table_scoring.score_table": "score-file's pass over one Arrow table, without Ray",
    "worker.jobs.batch_file.score_file": "the score-file job from Python",
    "worker.jobs.batch_file.check_files": "score_file's checks of its paths, before a model loads",
    "worker.jobs.batch_file.FileSummary": "what score_file returns",
    "worker.jobs.batch_file.ScoringStopped": "what score_file raises when stopped",
    "worker.core.errors.WorkerError": "the root of the errors raised on purpose, to catch them all",
    "worker.core.errors.ConfigError": "raised by the clients, the settings and the jobs for a bad setting",
    "worker.core.errors.ServiceUnavailable": "raised by the clients when no broker answers",
    "worker.core.errors.ModelError": "raised for a model that fails; an example raises it",
    "worker.core.errors.InvalidInput": "what a Servable's prepare raises for inputs that do not fit",
}


def public_names() -> set[str]:
    return {f"producer.{name}" for name in producer.__all__} | set(PUBLIC)


def directives(folder: Path = REFERENCE) -> dict[str, str]:
    """Each ``::: name`` of the reference pages -> the page it is on."""
    found = {}
    for page in sorted(folder.glob("*.md")):
        for name in DIRECTIVE.findall(page.read_text(encoding="utf-8")):
            found[name] = page.name
    return found


def resolve(dotted: str) -> Any:
    """The object ``package.module.Name`` names: the longest importable module, then attributes."""
    parts = dotted.split(".")
    for split in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:split]))
        except ModuleNotFoundError:
            continue
        for attribute in parts[split:]:
            obj = getattr(obj, attribute)
        return obj
    raise ModuleNotFoundError(dotted)


def own_docstring(obj: Any) -> str:
    """The docstring written for ``obj`` itself: not a base class's, nor the signature a dataclass makes up."""
    if isinstance(obj, (staticmethod, classmethod)):
        obj = obj.__func__
    if isinstance(obj, property):
        obj = obj.fget
    if not inspect.isclass(obj):
        return (getattr(obj, "__doc__", None) or "").strip()
    doc = (obj.__dict__.get("__doc__") or "").strip()
    if dataclasses.is_dataclass(obj) and doc.startswith(f"{obj.__name__}("):
        return ""
    return doc


def undocumented(dotted: str, obj: Any) -> list[str]:
    """``dotted`` if it has no docstring of its own, and each public method or property its class defines
    without one."""
    missing = [] if own_docstring(obj) else [dotted]
    if inspect.isclass(obj):
        for name, member in vars(obj).items():
            callable_member = inspect.isfunction(member) or isinstance(member, (staticmethod, classmethod, property))
            if not name.startswith("_") and callable_member and not own_docstring(member):
                missing.append(f"{dotted}.{name}")
    return missing


def test_every_public_name_has_a_directive():
    covered = directives()
    assert sorted(public_names() - covered.keys()) == []


def test_every_directive_names_a_public_name():
    """A name documented but not declared public here would be promised without being checked."""
    covered = directives()
    assert sorted(f"{name} ({page})" for name, page in covered.items() if name not in public_names()) == []


@pytest.mark.parametrize("dotted", sorted(public_names()))
def test_public_names_resolve_and_are_documented(dotted: str):
    assert undocumented(dotted, resolve(dotted)) == []


def test_the_checks_can_fail(tmp_path: Path):
    page = tmp_path / "index.md"
    page.write_text("# API\n\n::: producer.ScoringClient\n    options:\n      heading_level: 3\n\n"
                    "Prose naming producer.ReplyTimeout is not a directive.\n", encoding="utf-8")
    assert directives(tmp_path) == {"producer.ScoringClient": "index.md"}

    @dataclasses.dataclass
    class NoDocstring:
        size: int = 0

    class HalfDocumented:
        """Documented."""

        def documented(self) -> None:
            """Documented."""

        def bare(self) -> None:
            pass

        @property
        def bare_property(self) -> int:
            return 0

        def _private(self) -> None:
            pass

    class Inherits(HalfDocumented):
        pass

    assert undocumented("NoDocstring", NoDocstring) == ["NoDocstring"]
    assert undocumented("HalfDocumented", HalfDocumented) == ["HalfDocumented.bare", "HalfDocumented.bare_property"]
    assert undocumented("Inherits", Inherits) == ["Inherits"]
    assert resolve("producer.send.BadLine").__name__ == "BadLine"
