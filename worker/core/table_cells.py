"""Table cells (Parquet, Arrow) and Avro decimals as JSON takes them: one conversion for ``score-file``'s rows, the
producer's and Avro request payloads."""

from __future__ import annotations

from decimal import Decimal
from typing import Any


def plain(value: object) -> object:
    """JSON for the cell types orjson does not know (an orjson ``default``): decimals as numbers, binary as text
    (UTF-8, undecodable bytes replaced), anything else (a duration, an interval) as its ``str``."""
    if isinstance(value, Decimal):
        return float(value)
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value)


def decimals_as_numbers(value: Any) -> Any:
    """``value`` with every Decimal in it, at any depth of lists and mappings, a float, as ``plain`` writes one."""
    if isinstance(value, Decimal):
        return float(value)
    if isinstance(value, list):
        return [decimals_as_numbers(item) for item in value]
    if isinstance(value, dict):
        return {key: decimals_as_numbers(item) for key, item in value.items()}
    return value
