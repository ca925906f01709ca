"""An answer's outputs as leaves, each a number (a regression output) or a label (a classification output). Pure.

Outputs are model-specific JSON; ``compare`` matches them leaf by leaf, by
path: ``churn_probability``, ``scores.invoice``, ``embedding[17]``. Statistics
are kept per field, the path with its list indices pooled (``embedding[*]``),
so that a 384-number embedding is one row of the report, not 384.

A leaf is a label when its value is a string, a bool or null, or an integer
under a key that names a label (``label``, ``class_id``, ``category``,
``prediction``...); any other number is a regression output.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

ROOT = "(outputs)"  # the path of outputs that are one value
LABEL_NAME = re.compile(r"label|class|category|predict|verdict|decision", re.IGNORECASE)


@dataclass(frozen=True)
class Leaf:
    path: str  # where it is: "scores.invoice", "embedding[17]"
    field: str  # the path with list indices pooled: "embedding[*]"
    value: float | str  # a number, or a label as text ("spam", "true", "3")

    @property
    def numeric(self) -> bool:
        return isinstance(self.value, float)


def leaves(outputs: Any) -> dict[str, Leaf]:
    """Every leaf of ``outputs`` by path. Empty lists and objects have none."""
    return {leaf.path: leaf for leaf in _walk(outputs, "", "", "")}


def _walk(value: Any, path: str, field: str, name: str) -> Iterator[Leaf]:
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _walk(item, f"{path}.{key}" if path else str(key), f"{field}.{key}" if field else str(key),
                             str(key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _walk(item, f"{path}[{index}]", f"{field}[*]", name)
    else:
        yield Leaf(path or ROOT, field or ROOT, _leaf_value(value, name))


def _leaf_value(value: Any, name: str) -> float | str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int) and LABEL_NAME.search(name):
        return str(value)
    if isinstance(value, (int, float)):
        return float(value)
    return "null" if value is None else str(value)


def probability(found: dict[str, Leaf]) -> Leaf | None:
    """The one leaf of outputs that are a single number in [0, 1] (a churn probability, a score), else None."""
    if len(found) != 1:
        return None
    (leaf,) = found.values()
    return leaf if isinstance(leaf.value, float) and 0.0 <= leaf.value <= 1.0 else None
