"""MkDocs hook: a page's link to a file of the repository outside docs/ (``../examples/README.md``).

On GitHub such a link opens the file; the site has no copy of it, so there the link becomes the path in
code font. The file must exist: a link to a missing one fails the build, as a broken link between pages does.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from mkdocs.exceptions import PluginError

LINK = re.compile(r"\[([^\]\n]+)\]\((\.\./[^)\s#]+)(#[^)\s]*)?\)")


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    docs = Path(config["docs_dir"]).resolve()
    repo = docs.parent
    page_dir = (docs / page.file.src_uri).parent

    def outside(match: re.Match[str]) -> str:
        text, target = match.group(1), match.group(2)
        path = (page_dir / target).resolve()
        if path.is_relative_to(docs):
            return match.group(0)
        if not path.is_relative_to(repo) or not path.exists():
            raise PluginError(f"{page.file.src_uri}: the link {target!r} leads to no file of the repository")
        shown = path.relative_to(repo).as_posix()
        named = text.strip("`").rstrip("/")
        if named in (shown, shown.rsplit("/", 1)[0]):
            return f"`{shown}`"
        return f"{text} (`{shown}`)"

    return LINK.sub(outside, markdown)
