"""The documentation site builds with ``mkdocs build --strict`` (mkdocs.yml: a broken link, a missing anchor,
a nav entry without its page or a page left out of the nav fails it), no page is an orphan (a page kept out
of the nav, such as a results file, is linked from some page), and the README stays a front door."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from tests.unit.test_doc_links import CODE_SPAN, FENCE, LINK, REPO, pages

README_MAX_LINES = 200


def _nav_pages(entries: list[Any]) -> Iterator[str]:
    for entry in entries:
        value = next(iter(entry.values())) if isinstance(entry, dict) else entry
        if isinstance(value, list):
            yield from _nav_pages(value)
        else:
            yield value


def test_the_site_builds_strict(tmp_path: Path) -> None:
    built = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=REPO, capture_output=True, text=True, timeout=240, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert built.returncode == 0, f"mkdocs build --strict failed:\n{built.stdout}\n{built.stderr[-6000:]}"
    assert (tmp_path / "site" / "reference" / "index.html").exists()


def test_every_page_is_in_the_nav_or_linked_from_one() -> None:
    config = yaml.safe_load((REPO / "mkdocs.yml").read_text(encoding="utf-8"))
    docs = REPO / config["docs_dir"]
    in_nav = {(docs / page).resolve() for page in _nav_pages(config["nav"])}
    linked: set[Path] = set()
    for page in pages():
        text = CODE_SPAN.sub("", FENCE.sub("", page.read_text(encoding="utf-8")))
        for target in LINK.findall(text):
            path = target.split("#", 1)[0]
            if path and "://" not in path:
                linked.add((page.parent / path).resolve())
    orphans = [str(p.relative_to(REPO)) for p in sorted(docs.rglob("*.md"))
               if p.resolve() not in in_nav | linked and "_hooks" not in p.parts]
    assert not orphans, f"pages neither in mkdocs.yml's nav nor linked from any page: {orphans}"


def test_the_readme_is_a_front_door() -> None:
    lines = (REPO / "README.md").read_text(encoding="utf-8").count("\n")
    assert lines <= README_MAX_LINES, (
        f"README.md has {lines} lines, more than {README_MAX_LINES}: move the detail to a page under docs/")
