"""What the pages' generated tables share: a table between two marker lines, rewritten or checked from the command line.

Used by worker/error_codes_doc.py (docs/wire-contract.md), worker/surface/metrics_doc.py
(docs/operations.md and docs/fleet.md) and worker/settings_doc.py (docs/configuration.md).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path


def escape(text: str) -> str:
    """Markdown-safe cell text: a cell ends at `|`; outside code spans, `<`, `>` and `*` are markup."""
    parts = text.replace("|", "\\|").split("`")
    for i in range(0, len(parts), 2):
        parts[i] = parts[i].replace("*", "\\*").replace("<", "\\<").replace(">", "\\>")
    return "`".join(parts)


def replace_between(text: str, begin: str, end: str, table: str) -> str:
    """``text`` with the part from ``begin`` to ``end`` replaced by ``table`` (markers included). Raises ValueError
    without both markers."""
    start, stop = text.find(begin), text.find(end)
    if start < 0 or stop < start:
        raise ValueError(f"the page needs the two marker lines, {begin!r} and then {end!r}")
    return text[:start] + table + text[stop + len(end):]


def write_or_check(argv: list[str] | None, command: str, pages: Path | tuple[Path, ...], what: str,
                   update: Callable[[str], str]) -> int:
    """``command``'s main: rewrite ``what`` (e.g. "the metrics table") on each of ``pages`` with ``update``, or
    with ``--check`` exit 1, writing nothing, if it is stale on any. ``--path`` names another page (that one only)."""
    defaults = (pages,) if isinstance(pages, Path) else pages
    parser = argparse.ArgumentParser(prog=command, description=f"Write {' and '.join(p.name for p in defaults)}'s "
                                     f"{what.removeprefix('the ')}.")
    parser.add_argument("--check", action="store_true", help=f"exit 1 if {what} is stale; write nothing")
    parser.add_argument("--path", type=Path, help=f"another page (default: {' and '.join(map(str, defaults))})")
    args = parser.parse_args(argv)
    stale = False
    for path in (args.path,) if args.path else defaults:
        text = path.read_text(encoding="utf-8")
        fresh = update(text)
        if args.check:
            if fresh != text:
                print(f"{path}: {what} is stale; run `{command}`", file=sys.stderr)
                stale = True
            continue
        if fresh != text:
            path.write_text(fresh, encoding="utf-8")
        print(f"{path}: {'written' if fresh != text else 'up to date'}", file=sys.stderr)
    return 1 if stale else 0
