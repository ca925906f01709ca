"""Every relative link and #anchor in the README and the docs resolves (GitHub's rendering of anchors)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
FENCE = re.compile(r"^ {0,3}(```|~~~).*?^ {0,3}\1", re.MULTILINE | re.DOTALL)
CODE_SPAN = re.compile(r"(`+)(?!`).+?(?<!`)\1(?!`)", re.DOTALL)
LINK = re.compile(r"!?\[(?:[^\]\\]|\\.)*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
HEADING = re.compile(r"^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$", re.MULTILINE)
HTML_ANCHOR = re.compile(r"<a\s+(?:name|id)=\"([^\"]+)\"")


def pages() -> list[Path]:
    found = [REPO / "README.md", REPO / "deploy" / "README.md", *sorted((REPO / "docs").rglob("*.md"))]
    return found + sorted((REPO / "examples").rglob("README.md"))


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: its text (no markup) lowercased, punctuation dropped, spaces to dashes."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link: its text
    text = re.sub(r"<[^>]+>", "", text).replace("`", "").replace("*", "")
    text = re.sub(r"(?<!\w)_+|_+(?!\w)", "", text)  # emphasis by underscores, not snake_case
    return re.sub(r"[^\w\- ]", "", text.lower()).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    text = FENCE.sub("", page.read_text(encoding="utf-8"))
    seen: dict[str, int] = {}
    found = set(HTML_ANCHOR.findall(text))
    for _, heading in HEADING.findall(text):
        base = slug(heading)
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return found


def broken_links(page: Path) -> list[str]:
    """The links of ``page`` that lead nowhere: a missing file or folder, or an anchor no heading has."""
    text = CODE_SPAN.sub("", FENCE.sub("", page.read_text(encoding="utf-8")))
    broken = []
    for target in LINK.findall(text):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # https:, mailto:: not ours to check
            continue
        path, _, anchor = target.partition("#")
        where = (page.parent / path).resolve() if path else page
        if not where.exists():
            broken.append(f"{target}: no such file")
        elif anchor and where.suffix == ".md" and anchor not in anchors(where):
            broken.append(f"{target}: no heading with the anchor #{anchor} in {_shown(where)}")
    return broken


def _shown(path: Path) -> str:
    return str(path.relative_to(REPO)) if path.is_relative_to(REPO) else str(path)


@pytest.mark.parametrize("page", pages(), ids=lambda p: str(p.relative_to(REPO)))
def test_every_link_resolves(page: Path):
    assert broken_links(page) == []


@pytest.mark.parametrize("heading, anchor", [
    ("Security: a company cluster (TLS, SASL, Redis ACL users)", "security-a-company-cluster-tls-sasl-redis-acl-users"),
    ("Guarantees (measured by the chaos suite)", "guarantees-measured-by-the-chaos-suite"),
    ("The confluent-kafka transport", "the-confluent-kafka-transport"),
    ("`--processes N` and the supervisor", "--processes-n-and-the-supervisor"),
    ("Offline: `score-file`, the scheduled batch job", "offline-score-file-the-scheduled-batch-job"),
    ("max_poll_interval_ms and _slow_ steps", "max_poll_interval_ms-and-slow-steps"),
    ("Wire contract v1", "wire-contract-v1"),
])
def test_anchors_follow_github(heading: str, anchor: str):
    assert slug(heading) == anchor


def test_a_broken_link_or_anchor_is_found(tmp_path: Path):
    page = tmp_path / "page.md"
    (tmp_path / "other.md").write_text("# Other\n\n## Same\n\n## Same\n", encoding="utf-8")
    page.write_text("# Page\n\n[ok](other.md#same-1) [self](#page) [web](https://example.com/x#y)\n"
                    "[gone](missing.md) [bad](other.md#nothing) [also bad](#nowhere)\n"
                    "```\n[in code](ignored.md)\n```\n`[span](ignored.md)`\n", encoding="utf-8")
    assert broken_links(page) == [
        "missing.md: no such file",
        f"other.md#nothing: no heading with the anchor #nothing in {page.parent / 'other.md'}",
        f"#nowhere: no heading with the anchor #nowhere in {page}",
    ]
