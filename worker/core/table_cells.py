"""Table cells (Parquet, Arrow) as JSON takes them: one conversion for ``score-file``'s rows and the producer's."""

from __future__ import annotations

from decimal import Decimal


def plain(value: object) -> object:
    """JSON for the cell types orjson does not know (an orjson ``default``): decimals as numbers, binary as text
    (UTF-8, undecodable bytes replaced), anything else (a duration, an interval) as its ``str``."""
    if isinstance(value, Decimal):
        return float(value)
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value)
