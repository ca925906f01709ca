"""The table of error codes in docs/wire-contract.md, written from the wire contract's ERROR_CODES so that it
cannot drift.

    python -m worker.error_codes_doc           # rewrite the table in docs/wire-contract.md
    python -m worker.error_codes_doc --check   # exit 1, changing nothing, if the table there is stale

One row per code of worker/core/wire.py's ERROR_CODES, in the order declared:
the code, how its records are sent (an error reply, a dead letter, or either)
and what it means. Only the lines between BEGIN and END are written; the prose
around them is edited by hand.
"""

from __future__ import annotations

import sys
from pathlib import Path

from worker.core.wire import ERROR_CODES, ErrorCode
from worker.doc_tables import escape, replace_between, write_or_check

DOC = Path(__file__).resolve().parent.parent / "docs" / "wire-contract.md"
COMMAND = "python -m worker.error_codes_doc"
BEGIN = f"<!-- BEGIN error codes table: written by `{COMMAND}` from worker/core/wire.py; do not edit -->"
END = "<!-- END error codes table -->"


def rows() -> list[ErrorCode]:
    """Every error code of the contract, in the order worker/core/wire.py declares them."""
    return list(ERROR_CODES.values())


def render() -> str:
    """The table, markers included."""
    lines = [BEGIN, "", "| code | sent as | when |", "|---|---|---|"]
    lines += [f"| `{r.code}` | {escape(r.sent_as.value)} | {escape(r.meaning)} |" for r in rows()]
    return "\n".join([*lines, "", END])


def update(text: str) -> str:
    """``text`` with the part from BEGIN to END replaced by ``render()``. Raises ValueError without both markers."""
    return replace_between(text, BEGIN, END, render())


def main(argv: list[str] | None = None) -> int:
    return write_or_check(argv, COMMAND, DOC, "the error codes table", update)


if __name__ == "__main__":
    sys.exit(main())
